# Sourced by the e2e scripts: what `ringcachectl` (the array CTL, set by the script) says of the
# cluster.
#   json_field KEY          < JSON  -> the top-level field KEY
#   role_state ROLE ID              -> the state of node (ROLE, ID) in `node list` ("" if absent)
#   node_state ID                   -> the state of cache node ID
#   state_is ID STATE               -> succeeds if cache node ID is in STATE
#   rebalance                       -> the data rebalance's state, members and out list:
#                                      "idle 1,2,3 4"
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)[\"$1\"])"; }
role_state() {
  "${CTL[@]}" --json node list 2> /dev/null | python3 -c '
import json, sys
nodes = json.load(sys.stdin)
nodes = nodes["nodes"] if isinstance(nodes, dict) else nodes
print(next((n.get("state", "") for n in nodes
            if n["role"] == sys.argv[1] and int(n["id"]) == int(sys.argv[2])), ""))' "$1" "$2"
}
node_state() { role_state cachenode "$1"; }
state_is() { [ "$(node_state "$1")" = "$2" ]; }
rebalance() {
  "${CTL[@]}" --json status 2> /dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)["rebalance"]
print(r["state"], ",".join(map(str, sorted(r["members"]))), ",".join(map(str, sorted(r.get("out", [])))))'
}
