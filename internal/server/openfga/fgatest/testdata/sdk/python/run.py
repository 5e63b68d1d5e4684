"""Drives openfga-sdk as an application would against FGA_API_URL; exits 1 on the
first wrong answer. See ../README.md."""

import asyncio
import json
import os
import sys

from openfga_sdk import CreateStoreRequest, FgaObject, RelationshipCondition, UserTypeFilter
from openfga_sdk.client import ClientConfiguration, OpenFgaClient
from openfga_sdk.client.models import (
    ClientBatchCheckItem,
    ClientBatchCheckRequest,
    ClientCheckRequest,
    ClientListObjectsRequest,
    ClientReadChangesRequest,
    ClientTuple,
    ClientWriteRequest,
)
from openfga_sdk.client.models.list_users_request import ClientListUsersRequest
from openfga_sdk.credentials import CredentialConfiguration, Credentials

NOW = "2026-11-27T00:00:00Z"


def expect(what, got, want):
    if got != want:
        print(f"{what}: got {got!r}, want {want!r}", file=sys.stderr)
        sys.exit(1)


async def main():
    credentials = None
    if os.environ.get("FGA_API_TOKEN"):
        credentials = Credentials(
            method="api_token",
            configuration=CredentialConfiguration(api_token=os.environ["FGA_API_TOKEN"]),
        )
    config = ClientConfiguration(api_url=os.environ["FGA_API_URL"], credentials=credentials)
    with open(os.environ["FGA_MODEL_JSON"]) as f:
        model = json.load(f)
    async with OpenFgaClient(config) as fga:
        store = await fga.create_store(CreateStoreRequest(name="python-sdk"))
        fga.set_store_id(store.id)
        written = await fga.write_authorization_model(model)
        fga.set_authorization_model_id(written.authorization_model_id)

        await fga.write(ClientWriteRequest(writes=[
            ClientTuple("user:anne", "owner", "document:roadmap"),
            ClientTuple("user:beth", "member", "group:eng"),
            ClientTuple("group:eng#member", "viewer", "folder:plans"),
            ClientTuple("folder:plans", "parent", "document:roadmap"),
            ClientTuple("user:carl", "viewer", "document:budget",
                        RelationshipCondition(name="not_expired", context={"expires_at": "2030-01-01T00:00:00Z"})),
            ClientTuple("user:*", "viewer", "document:handbook"),
            ClientTuple("user:dave", "blocked", "document:handbook"),
        ]))

        async def check(user, relation, obj, context=None):
            resp = await fga.check(ClientCheckRequest(user=user, relation=relation, object=obj, context=context))
            return resp.allowed

        expect("anne owns roadmap", await check("user:anne", "viewer", "document:roadmap"), True)
        expect("beth via group and folder", await check("user:beth", "viewer", "document:roadmap"), True)
        expect("carl not on roadmap", await check("user:carl", "viewer", "document:roadmap"), False)
        expect("carl before expiry", await check("user:carl", "viewer", "document:budget", {"current_time": NOW}), True)
        expect("carl after expiry",
               await check("user:carl", "viewer", "document:budget", {"current_time": "2031-01-01T00:00:00Z"}), False)
        expect("anyone reads handbook", await check("user:erin", "viewer", "document:handbook"), True)
        expect("dave blocked", await check("user:dave", "viewer", "document:handbook"), False)

        batch = await fga.batch_check(ClientBatchCheckRequest(checks=[
            ClientBatchCheckItem("user:anne", "viewer", "document:roadmap", correlation_id="a"),
            ClientBatchCheckItem("user:dave", "viewer", "document:handbook", correlation_id="b"),
            ClientBatchCheckItem("user:carl", "viewer", "document:budget", correlation_id="c",
                                 context={"current_time": NOW}),
        ]))
        expect("batch check", {r.correlation_id: r.allowed for r in batch.result}, {"a": True, "b": False, "c": True})

        objects = await fga.list_objects(ClientListObjectsRequest(user="user:beth", relation="viewer", type="document"))
        expect("beth's documents", sorted(objects.objects), ["document:handbook", "document:roadmap"])
        carls = await fga.list_objects(ClientListObjectsRequest(
            user="user:carl", relation="viewer", type="document", context={"current_time": NOW}))
        expect("carl's documents", sorted(carls.objects), ["document:budget", "document:handbook"])

        changes = await fga.read_changes(ClientReadChangesRequest("document"))
        expect("document changes", sorted(
            f"{c.operation} {c.tuple_key.object}#{c.tuple_key.relation}@{c.tuple_key.user}" for c in changes.changes), [
            "TUPLE_OPERATION_WRITE document:budget#viewer@user:carl",
            "TUPLE_OPERATION_WRITE document:handbook#blocked@user:dave",
            "TUPLE_OPERATION_WRITE document:handbook#viewer@user:*",
            "TUPLE_OPERATION_WRITE document:roadmap#owner@user:anne",
            "TUPLE_OPERATION_WRITE document:roadmap#parent@folder:plans",
        ])

        users = await fga.list_users(ClientListUsersRequest(
            object=FgaObject(type="document", id="roadmap"), relation="viewer",
            user_filters=[UserTypeFilter(type="user")]))
        expect("roadmap's users", sorted(f"{u.object.type}:{u.object.id}" for u in users.users),
               ["user:anne", "user:beth"])
        sets = await fga.list_users(ClientListUsersRequest(
            object=FgaObject(type="folder", id="plans"), relation="viewer",
            user_filters=[UserTypeFilter(type="group", relation="member")]))
        expect("plans' groups", [f"{u.userset.type}:{u.userset.id}#{u.userset.relation}" for u in sets.users],
               ["group:eng#member"])
    print("ok")


asyncio.run(main())
