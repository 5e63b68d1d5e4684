// k6 load script for latch's Permify API, in the shape of Permify's published load test:
// setup() writes the reference schema and data set (ids 0..N-1: self, follower i+1,
// blocked i+2, content i owned by i, interaction i created by i on content i, user i
// and content i public when i%4 == 0) through data/write in batches of 1,000; then
// content and interaction view checks arrive at a rate ramping to 10,000/s.
//
//   k6 run -e BASE=http://127.0.0.1:8443 -e TOKEN=key -e IDS=100000 k6-permify.js
import http from 'k6/http';
import { check } from 'k6';

const BASE = __ENV.BASE || 'http://127.0.0.1:8443';
const IDS = parseInt(__ENV.IDS || '100000');
const TENANT = __ENV.TENANT || 't1';
const HEADERS = { 'Content-Type': 'application/json', Authorization: `Bearer ${__ENV.TOKEN || ''}` };

export const options = {
  setupTimeout: '10m',
  scenarios: {
    checks: {
      executor: 'ramping-arrival-rate',
      startRate: 10,
      timeUnit: '1s',
      preAllocatedVUs: 200,
      maxVUs: 1000,
      stages: [
        { target: 100, duration: '10s' },
        { target: 1000, duration: '30s' },
        { target: 10000, duration: '60s' },
      ],
    },
  },
  summaryTrendStats: ['avg', 'med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};

const SCHEMA = `entity user {
    relation self @user
    relation follower @user
    relation blocked @user
    attribute is_public boolean
    permission view = self or (is_public or follower) not blocked
}
entity content {
    relation owner @user
    attribute is_public boolean
    permission view = owner.self or (is_public or owner.follower) not owner.blocked
}
entity interaction {
    relation creator @user
    relation parent @content
    permission view = creator.self or (creator.view and parent.view)
}`;

function post(path, body) {
  const res = http.post(`${BASE}/v1/tenants/${TENANT}/${path}`, JSON.stringify(body), { headers: HEADERS });
  if (res.status !== 200) {
    throw new Error(`${path}: ${res.status} ${res.body}`);
  }
  return res.json();
}

const ref = (type, id) => ({ type, id: String(id) });
const tuple = (et, ei, rel, st, si) => ({ entity: ref(et, ei), relation: rel, subject: ref(st, si) });

export function setup() {
  post('schemas/write', { schema: SCHEMA });
  let items = [];
  let snap = '';
  const flush = () => {
    if (items.length === 0) return;
    const tuples = items.filter((x) => !x.attribute);
    const attributes = items.filter((x) => x.attribute);
    snap = post('data/write', { metadata: { schema_version: '' }, tuples, attributes }).snap_token;
    items = [];
  };
  const add = (x) => {
    items.push(x);
    if (items.length === 1000) flush();
  };
  for (let i = 0; i < IDS; i++) {
    add(tuple('user', i, 'self', 'user', i));
    add(tuple('user', i, 'follower', 'user', (i + 1) % IDS));
    add(tuple('user', i, 'blocked', 'user', (i + 2) % IDS));
    add(tuple('content', i, 'owner', 'user', i));
    add(tuple('interaction', i, 'creator', 'user', i));
    add(tuple('interaction', i, 'parent', 'content', i));
    if (i % 4 === 0) {
      const value = { '@type': 'type.googleapis.com/base.v1.BooleanValue', data: true };
      add({ entity: ref('user', i), attribute: 'is_public', value });
      add({ entity: ref('content', i), attribute: 'is_public', value });
    }
  }
  flush();
  return { snap };
}

export default function () {
  const type = Math.random() < 0.5 ? 'content' : 'interaction';
  const res = http.post(`${BASE}/v1/tenants/${TENANT}/permissions/check`, JSON.stringify({
    metadata: { snap_token: '', schema_version: '', depth: 20 },
    entity: ref(type, Math.floor(Math.random() * IDS)),
    permission: 'view',
    subject: { type: 'user', id: String(Math.floor(Math.random() * IDS)), relation: '' },
  }), { headers: HEADERS, tags: { name: 'check' } });
  check(res, {
    'status 200': (r) => r.status === 200,
    allowed: (r) => r.status === 200 && r.json('can') === 'CHECK_RESULT_ALLOWED',
  });
}
