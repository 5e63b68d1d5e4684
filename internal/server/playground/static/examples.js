// latch playground: the examples the picker loads. Each one's checks and assertions
// pass as written; the browser test loads every one and runs them.
"use strict";

const EXAMPLES = {
  documents: {
    title: "Documents, groups and a caveat",
    language: "",
    schema: `definition user {}

definition group {
  relation member: user | group#member
}

caveat on_network(ip ipaddress, cidr string) {
  ip.in_cidr(cidr)
}

definition document {
  relation owner: user
  relation viewer: user | group#member | user with on_network
  permission edit = owner
  permission view = viewer + edit
}`,
    relationships: `document:readme#owner@user:ada
document:readme#viewer@group:eng#member
group:eng#member@user:alice
document:plan#viewer@user:bob[on_network:{"cidr": "10.0.0.0/8"}]`,
    checks: `document:readme#view@user:alice
document:readme#edit@user:alice
document:plan#view@user:bob
document:plan#view@user:bob with {"ip": "10.1.2.3"}`,
    assertions: `assertTrue:
  - document:readme#view@user:alice
  - document:readme#edit@user:ada
assertFalse:
  - document:readme#edit@user:alice
assertCaveated:
  - document:plan#view@user:bob`,
    validation: `document:readme#view:
  - "[group:eng#member] is <document:readme#viewer>"
  - "[user:ada] is <document:readme#owner>"
  - "[user:alice] is <group:eng#member>"`,
  },
  social: {
    title: "Social network",
    language: "",
    schema: `definition user {
  relation friend: user
  relation blocked: user
}

// A post is seen by its author, by the author's friends when shared with them, by
// everyone when public, and never by someone the author blocked.
definition post {
  relation author: user
  relation shared_with: user#friend
  relation public: user:*
  permission edit = author
  permission view = author + shared_with + public - author->blocked
}`,
    relationships: `user:alice#friend@user:bob
user:alice#blocked@user:mallory
post:hello#author@user:alice
post:hello#shared_with@user:alice#friend
post:news#author@user:alice
post:news#public@user:*`,
    checks: `post:hello#view@user:bob
post:hello#view@user:carol
post:news#view@user:carol
post:news#view@user:mallory`,
    assertions: `assertTrue:
  - post:hello#view@user:bob
  - post:news#view@user:carol
  - post:hello#edit@user:alice
assertFalse:
  - post:hello#view@user:carol
  - post:news#view@user:mallory`,
    validation: "",
  },
  folders: {
    title: "Nested groups and folders",
    language: "",
    schema: `definition user {}

definition group {
  relation member: user | group#member
}

definition folder {
  relation parent: folder
  relation viewer: user | group#member
  permission view = viewer + parent->view
}

definition document {
  relation folder: folder
  relation viewer: user | group#member
  permission view = viewer + folder->view
}`,
    relationships: `group:staff#member@group:eng#member
group:eng#member@user:alice
folder:root#viewer@group:staff#member
folder:reports#parent@folder:root
document:q3#folder@folder:reports
document:q3#viewer@user:bob`,
    checks: `document:q3#view@user:alice
document:q3#view@user:bob
document:q3#view@user:eve`,
    assertions: `assertTrue:
  - document:q3#view@user:alice
  - document:q3#view@user:bob
assertFalse:
  - document:q3#view@user:eve`,
    validation: "",
  },
  caveats: {
    title: "Caveats: networks and clearance",
    language: "",
    schema: `caveat on_network(ip ipaddress, cidr string) {
  ip.in_cidr(cidr)
}

caveat has_clearance(level int, required int) {
  level >= required
}

definition user {}

definition document {
  relation viewer: user | user with on_network
  relation classified_reader: user with has_clearance
  permission view = viewer + classified_reader
}`,
    relationships: `document:plan#viewer@user:alice
document:plan#viewer@user:bob[on_network:{"cidr": "10.0.0.0/8"}]
document:secret#classified_reader@user:carol[has_clearance:{"required": 3}]`,
    checks: `document:plan#view@user:bob
document:plan#view@user:bob with {"ip": "10.1.2.3"}
document:plan#view@user:bob with {"ip": "192.168.0.1"}
document:secret#view@user:carol with {"level": 5}
document:secret#view@user:carol with {"level": 1}`,
    assertions: `assertTrue:
  - document:plan#view@user:alice
  - 'document:plan#view@user:bob with {"ip": "10.1.2.3"}'
  - 'document:secret#view@user:carol with {"level": 5}'
assertCaveated:
  - document:plan#view@user:bob
assertFalse:
  - 'document:secret#view@user:carol with {"level": 1}'`,
    validation: "",
  },
  permify: {
    title: "Permify: attributes and a rule",
    language: "permify",
    schema: `entity user {}

entity organization {
  relation member @user
}

entity document {
  relation owner @user
  relation org @organization
  attribute is_public boolean
  attribute classification integer

  permission edit = owner
  permission view = is_public or owner or (org.member and low_classification(classification))
}

rule low_classification(classification integer) {
  classification <= 2
}`,
    relationships: `organization:acme#member@user:alice
document:plan#org@organization:acme
document:secret#org@organization:acme
document:plan#owner@user:bob
document:handbook$is_public|boolean:true
document:plan$classification|integer:1
document:secret$classification|integer:4`,
    checks: `document:handbook#view@user:eve
document:plan#view@user:alice
document:secret#view@user:alice
document:plan#edit@user:alice`,
    assertions: `- name: "public, shared and classified documents"
  checks:
    - entity: "document:handbook"
      subject: "user:eve"
      assertions:
        view: true
    - entity: "document:plan"
      subject: "user:alice"
      assertions:
        view: true
        edit: false
    - entity: "document:secret"
      subject: "user:alice"
      assertions:
        view: false`,
    validation: "",
  },
};
