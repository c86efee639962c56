#!/bin/bash
# The wire between the two hosts, before any RDMA: each host resolves the
# other's addresses by real ARP (IPv4) and ND (IPv6), on the NIC and on its
# VLAN, and finds the peer's MAC in its neighbour table.
#   wire:peer-gids   the peer published a RoCE v2 GID of every family;
#   wire:arp, wire:nd, wire:vlan-arp, wire:vlan-nd
#                    `ip neigh` has the peer's address with its MAC.
set -uo pipefail
source "$UDAH_CHECK_LIB"

missing=
for fam in ipv4 ipv6 link-local vlan-ipv4 vlan-ipv6 vlan-link-local; do
  peer_gid "$fam" >/dev/null || missing+=" $fam"
done
if [[ -n "$missing" ]]; then
  fail wire:peer-gids "host $UDAH_PEER_ROLE has no RoCE v2 GID of:$missing"
else
  pass wire:peer-gids
fi

neigh() { # <name> <address>
  local n
  # A TCP connection attempt to the discard port resolves the address (the
  # peer answers with a reset); no ping binary is needed.
  timeout 5 bash -c "exec 3<>/dev/tcp/$2/9" 2>/dev/null
  for _ in $(seq 1 20); do
    n=$(ip neigh show "$2" | head -n1)
    [[ "$n" == *"lladdr $UDAH_PEER_MAC"* ]] && break
    sleep 0.25
  done
  echo "neigh $2: ${n:-none}"
  if [[ "$n" == *"lladdr $UDAH_PEER_MAC"* ]]; then pass "$1"; else fail "$1" "no neighbour entry with $UDAH_PEER_MAC for $2: '${n:-none}'"; fi
}
neigh wire:arp "$UDAH_PEER_IPV4"
neigh wire:nd "$UDAH_PEER_IPV6"
neigh wire:vlan-arp "$UDAH_PEER_VLAN_IPV4"
neigh wire:vlan-nd "$UDAH_PEER_VLAN_IPV6"
