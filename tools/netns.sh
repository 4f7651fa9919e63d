#!/usr/bin/env bash
#
# netns.sh: several "hosts" on one machine, one network namespace each, all on
# one bridge in the root namespace (needs root: ip netns, veth, bridge).
#
#   tools/netns.sh up N [PREFIX]   namespaces PREFIX0..PREFIX<N-1> (PREFIX
#                                  defaults to aggh), bridge PREFIXbr with
#                                  10.77.0.1/24, in namespace i: eth0 with
#                                  10.77.0.(i+2)/24, lo up, default route via
#                                  10.77.0.1; prints the table "ns ip"
#   tools/netns.sh down [PREFIX]   removes all that up made; never fails
#   tools/netns.sh bytes I [PREFIX]
#                                  "tx_bytes rx_bytes" of namespace I's eth0
#   tools/netns.sh ip I            10.77.0.(I+2)
#
# Sourced, it only defines the functions netns_up, netns_down, netns_bytes and
# netns_ip (same arguments). Each namespace also gets /etc/netns/<ns>/hosts
# (which "ip netns exec" bind-mounts on /etc/hosts): the root namespace's
# hosts plus "10.77.0.(i+2) PREFIX<i>" for every namespace, so the namespace
# names resolve inside them (tools/netns_rsh gives each namespace's commands
# its name as hostname).
#
# Interface names are limited to 15 characters: PREFIX at most 9. Only one
# PREFIX can be up at a time on one subnet: NETNS_NET (the first three
# octets, default 10.77.0) gives another one its own, for every command.
set -euo pipefail

NETNS_NET=${NETNS_NET:-10.77.0}
NETNS_DEFAULT_PREFIX=aggh

_netns_prefix() {
    local p=${1:-$NETNS_DEFAULT_PREFIX}
    if ! [[ $p =~ ^[A-Za-z][A-Za-z0-9_]{0,8}$ ]]; then
        echo "netns.sh: bad prefix '$p' (a letter, then at most 8 letters, digits or _)" >&2
        return 2
    fi
    echo "$p"
}

_netns_index() {
    if ! [[ ${1:-} =~ ^[0-9]+$ ]] || [ "$1" -gt 252 ]; then
        echo "netns.sh: bad namespace index '${1:-}' (0..252)" >&2
        return 2
    fi
}

netns_ip() {
    _netns_index "${1:-}" || return
    echo "$NETNS_NET.$(( $1 + 2 ))"
}

# The namespaces PREFIX<digits> that exist now.
_netns_list() {
    ip netns list 2>/dev/null | awk -v re="^$1[0-9]+\$" '$1 ~ re { print $1 }'
}

netns_down() {
    local prefix ns link pids
    prefix=$(_netns_prefix "${1:-}") || return
    for ns in $(_netns_list "$prefix"); do
        pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ' || true)
        if [ -n "$pids" ]; then
            echo "netns.sh: warning: processes still in $ns: $pids(the namespace lives on until they end)" >&2
        fi
        ip netns del "$ns" 2>/dev/null || true
    done
    # Root ends of the veths (gone with their namespace unless a process
    # still holds it), then the bridge.
    for link in $(ip -o link show 2>/dev/null |
                  awk -F': ' -v re="^${prefix}v[0-9]+(@.*)?\$" '$2 ~ re { sub(/@.*/, "", $2); print $2 }'); do
        ip link del "$link" 2>/dev/null || true
    done
    ip link del "${prefix}br" 2>/dev/null || true
    rm -rf /etc/netns/"$prefix"[0-9]* 2>/dev/null || true
    rmdir /etc/netns 2>/dev/null || true
    return 0
}

netns_up() {
    local n=${1:-} prefix i ns ip hosts
    if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 253 ]; then
        echo "netns.sh: up: bad count '$n' (1..253)" >&2
        return 2
    fi
    prefix=$(_netns_prefix "${2:-}") || return
    # Leftovers of an earlier (crashed) run
    netns_down "$prefix"
    local other
    other=$(ip -o -4 addr show 2>/dev/null | awk -v a="$NETNS_NET.1/" 'index($4, a) == 1 { print $2 }')
    if [ -n "$other" ]; then
        echo "netns.sh: $NETNS_NET.1 is already on $other (another prefix up? tools/netns.sh down PREFIX)" >&2
        return 1
    fi

    ip link add "${prefix}br" type bridge
    ip addr add "$NETNS_NET.1/24" dev "${prefix}br"
    ip link set "${prefix}br" up

    hosts=$(cat /etc/hosts 2>/dev/null || echo "127.0.0.1 localhost")
    hosts+=$'\n'"# tools/netns.sh"
    for (( i = 0; i < n; i++ )); do
        hosts+=$'\n'"$NETNS_NET.$(( i + 2 )) $prefix$i"
    done

    for (( i = 0; i < n; i++ )); do
        ns=$prefix$i
        ip=$NETNS_NET.$(( i + 2 ))
        ip netns add "$ns"
        ip link add "${prefix}v$i" type veth peer name "${prefix}p$i"
        ip link set "${prefix}p$i" netns "$ns"
        ip -n "$ns" link set "${prefix}p$i" name eth0
        ip -n "$ns" addr add "$ip/24" dev eth0
        ip -n "$ns" link set lo up
        ip -n "$ns" link set eth0 up
        ip -n "$ns" route add default via "$NETNS_NET.1"
        ip link set "${prefix}v$i" master "${prefix}br"
        ip link set "${prefix}v$i" up
        mkdir -p /etc/netns/"$ns"
        printf '%s\n' "$hosts" >/etc/netns/"$ns"/hosts
    done

    printf '%-10s %s\n' ns ip
    printf '%-10s %s\n' "(root)" "$NETNS_NET.1 (${prefix}br)"
    for (( i = 0; i < n; i++ )); do
        printf '%-10s %s\n' "$prefix$i" "$NETNS_NET.$(( i + 2 ))"
    done
}

netns_bytes() {
    local prefix ns
    _netns_index "${1:-}" || return
    prefix=$(_netns_prefix "${2:-}") || return
    ns=$prefix$1
    ip netns exec "$ns" sh -c \
        'cat /sys/class/net/eth0/statistics/tx_bytes /sys/class/net/eth0/statistics/rx_bytes' |
        tr '\n' ' ' | sed 's/ $/\n/'
}

_netns_usage() {
    sed -n '3,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    return 2
}

netns_main() {
    local cmd=${1:-}
    [ $# -gt 0 ] && shift
    case $cmd in
    up) { [ $# -ge 1 ] && [ $# -le 2 ]; } || _netns_usage; netns_up "$@" ;;
    down) [ $# -le 1 ] || _netns_usage; netns_down "$@" ;;
    bytes) { [ $# -ge 1 ] && [ $# -le 2 ]; } || _netns_usage; netns_bytes "$@" ;;
    ip) [ $# -eq 1 ] || _netns_usage; netns_ip "$@" ;;
    *) _netns_usage ;;
    esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    if [ "$(id -u)" != 0 ] && [ "${1:-}" != ip ]; then
        echo "netns.sh: needs root" >&2
        exit 1
    fi
    netns_main "$@"
fi
