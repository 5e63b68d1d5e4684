// Drives @openfga/sdk as an application would against FGA_API_URL; exits 1 on the first
// wrong answer. See ../README.md.
import { readFileSync } from "node:fs";
import { CredentialsMethod, OpenFgaClient } from "@openfga/sdk";

const token = process.env.FGA_API_TOKEN;
const fga = new OpenFgaClient({
  apiUrl: process.env.FGA_API_URL,
  credentials: token ? { method: CredentialsMethod.ApiToken, config: { token } } : undefined,
});
const model = JSON.parse(readFileSync(process.env.FGA_MODEL_JSON, "utf8"));

function expect(what, got, want) {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  if (g !== w) {
    console.error(`${what}: got ${g}, want ${w}`);
    process.exit(1);
  }
}

const store = await fga.createStore({ name: "node-sdk" });
fga.storeId = store.id;
const written = await fga.writeAuthorizationModel(model);
fga.authorizationModelId = written.authorization_model_id;

await fga.write({
  writes: [
    { user: "user:anne", relation: "owner", object: "document:roadmap" },
    { user: "user:beth", relation: "member", object: "group:eng" },
    { user: "group:eng#member", relation: "viewer", object: "folder:plans" },
    { user: "folder:plans", relation: "parent", object: "document:roadmap" },
    { user: "user:carl", relation: "viewer", object: "document:budget",
      condition: { name: "not_expired", context: { expires_at: "2030-01-01T00:00:00Z" } } },
    { user: "user:*", relation: "viewer", object: "document:handbook" },
    { user: "user:dave", relation: "blocked", object: "document:handbook" },
  ],
});

const check = async (user, relation, object, context) =>
  (await fga.check({ user, relation, object, context })).allowed;
expect("anne owns roadmap", await check("user:anne", "viewer", "document:roadmap"), true);
expect("beth via group and folder", await check("user:beth", "viewer", "document:roadmap"), true);
expect("carl not on roadmap", await check("user:carl", "viewer", "document:roadmap"), false);
expect("carl before expiry", await check("user:carl", "viewer", "document:budget", { current_time: "2026-11-27T00:00:00Z" }), true);
expect("carl after expiry", await check("user:carl", "viewer", "document:budget", { current_time: "2031-01-01T00:00:00Z" }), false);
expect("anyone reads handbook", await check("user:erin", "viewer", "document:handbook"), true);
expect("dave blocked", await check("user:dave", "viewer", "document:handbook"), false);

const batch = await fga.batchCheck({
  checks: [
    { user: "user:anne", relation: "viewer", object: "document:roadmap", correlationId: "a" },
    { user: "user:dave", relation: "viewer", object: "document:handbook", correlationId: "b" },
    { user: "user:carl", relation: "viewer", object: "document:budget", correlationId: "c",
      context: { current_time: "2026-11-27T00:00:00Z" } },
  ],
});
const byId = Object.fromEntries(batch.result.map((r) => [r.correlationId, r.allowed]));
expect("batch check", byId, { a: true, b: false, c: true });

const objects = await fga.listObjects({ user: "user:beth", relation: "viewer", type: "document" });
expect("beth's documents", objects.objects.sort(), ["document:handbook", "document:roadmap"]);
const carls = await fga.listObjects({ user: "user:carl", relation: "viewer", type: "document",
  context: { current_time: "2026-11-27T00:00:00Z" } });
expect("carl's documents", carls.objects.sort(), ["document:budget", "document:handbook"]);

const changes = await fga.readChanges({ type: "document" });
expect("document changes", changes.changes.map((c) => `${c.operation} ${c.tuple_key.object}#${c.tuple_key.relation}@${c.tuple_key.user}`).sort(), [
  "TUPLE_OPERATION_WRITE document:budget#viewer@user:carl",
  "TUPLE_OPERATION_WRITE document:handbook#blocked@user:dave",
  "TUPLE_OPERATION_WRITE document:handbook#viewer@user:*",
  "TUPLE_OPERATION_WRITE document:roadmap#owner@user:anne",
  "TUPLE_OPERATION_WRITE document:roadmap#parent@folder:plans",
]);
const users = await fga.listUsers({ object: { type: "document", id: "roadmap" }, relation: "viewer",
  user_filters: [{ type: "user" }] });
expect("roadmap's users", users.users.map((u) => u.object.type + ":" + u.object.id).sort(), ["user:anne", "user:beth"]);
const sets = await fga.listUsers({ object: { type: "folder", id: "plans" }, relation: "viewer",
  user_filters: [{ type: "group", relation: "member" }] });
expect("plans' groups", sets.users.map((u) => `${u.userset.type}:${u.userset.id}#${u.userset.relation}`), ["group:eng#member"]);

console.log("ok");
