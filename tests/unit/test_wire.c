/*
 * The wire format, pinned. Every size and offset of every struct in
 * agg/wire.h and of the shared-memory structs in agg/dp.h is written out
 * below as a literal number, checked once at compile time and once at run
 * time (with the field's name in the message), so a layout change cannot
 * slip through as a rebuild of both ends. The AGG_FMT_* strings that drive
 * byte swapping are checked against the same tables, the big-endian encoding
 * is checked byte by byte, the message helpers are exercised over a real
 * socketpair with a thread as the peer, and the stats file is read back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <isa-l/crc.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/dp.h"
#include "agg/sock.h"
#include "agg/status.h"
#include "agg/net.h"
#include "agg/wire.h"

/* ---- layout tables -------------------------------------------------- */

typedef struct field_pin {
    const char *name;
    size_t      off, size;           /* what the compiler laid out */
    size_t      want_off, want_size; /* what the wire says */
} field_pin_t;

#define FIELD_SIZE(_t, _f) sizeof(((_t *)0)->_f)

#define PIN_STATIC(_t, _f, _off, _size)                                        \
    _Static_assert(offsetof(_t, _f) == (_off), #_t "." #_f " moved");          \
    _Static_assert(FIELD_SIZE(_t, _f) == (_size), #_t "." #_f " resized");

#define PIN_ROW(_t, _f, _off, _size) \
    {#_f, offsetof(_t, _f), FIELD_SIZE(_t, _f), (_off), (_size)},

/* One list per struct; expands to static assertions and a runtime table. */
#define DEFINE_LAYOUT(_id, _t, _size, _list)                                   \
    _list(PIN_STATIC)                                                          \
    _Static_assert(sizeof(_t) == (_size), #_t " resized");                     \
    static const field_pin_t _id##_fields[] = {_list(PIN_ROW)};

#define HDR_LAYOUT(X)                                                          \
    X(agg_msg_hdr_t, magic, 0, 4)                                              \
    X(agg_msg_hdr_t, version, 4, 2)                                            \
    X(agg_msg_hdr_t, type, 6, 2)                                               \
    X(agg_msg_hdr_t, length, 8, 4)                                             \
    X(agg_msg_hdr_t, txid, 12, 4)
DEFINE_LAYOUT(hdr, agg_msg_hdr_t, 16, HDR_LAYOUT)

#define STATUS_LAYOUT(X) X(agg_msg_status_t, status, 0, 4)
DEFINE_LAYOUT(status, agg_msg_status_t, 4, STATUS_LAYOUT)

#define HELLO_LAYOUT(X)                                                        \
    X(agg_msg_hello_t, kind, 0, 4)                                             \
    X(agg_msg_hello_t, pid, 4, 4)                                              \
    X(agg_msg_hello_t, host, 8, 64)
DEFINE_LAYOUT(hello, agg_msg_hello_t, 72, HELLO_LAYOUT)

#define HELLO_REPLY_LAYOUT(X)                                                  \
    X(agg_msg_hello_reply_t, status, 0, 4)                                     \
    X(agg_msg_hello_reply_t, mgr_pid, 4, 4)                                    \
    X(agg_msg_hello_reply_t, num_switches, 8, 4)                               \
    X(agg_msg_hello_reply_t, num_cas, 12, 4)
DEFINE_LAYOUT(hello_reply, agg_msg_hello_reply_t, 16, HELLO_REPLY_LAYOUT)

#define SIM_REGISTER_LAYOUT(X)                                                 \
    X(agg_msg_sim_register_t, pid, 0, 4)                                       \
    X(agg_msg_sim_register_t, an_osts, 4, 4)                                   \
    X(agg_msg_sim_register_t, an_payload_per_ost, 8, 4)                        \
    X(agg_msg_sim_register_t, an_max_groups, 12, 4)                            \
    X(agg_msg_sim_register_t, an_sat_flows, 16, 4)                             \
    X(agg_msg_sim_register_t, workers, 20, 4)                                  \
    X(agg_msg_sim_register_t, host, 24, 64)                                    \
    X(agg_msg_sim_register_t, data_addr, 88, 64)
DEFINE_LAYOUT(sim_register, agg_msg_sim_register_t, 152, SIM_REGISTER_LAYOUT)

#define SIM_REGISTER_REPLY_LAYOUT(X)                                           \
    X(agg_msg_sim_register_reply_t, status, 0, 4)                              \
    X(agg_msg_sim_register_reply_t, sim_id, 4, 4)                              \
    X(agg_msg_sim_register_reply_t, num_switches, 8, 4)                        \
    X(agg_msg_sim_register_reply_t, reserved, 12, 4)
DEFINE_LAYOUT(sim_register_reply, agg_msg_sim_register_reply_t, 16,
              SIM_REGISTER_REPLY_LAYOUT)

#define SWITCH_LAYOUT(X)                                                       \
    X(agg_wire_switch_t, guid, 0, 8)                                           \
    X(agg_wire_switch_t, desc, 8, 64)
DEFINE_LAYOUT(switch, agg_wire_switch_t, 72, SWITCH_LAYOUT)

#define ENDPOINT_LAYOUT(X)                                                     \
    X(agg_wire_endpoint_t, transport, 0, 4)                                    \
    X(agg_wire_endpoint_t, length, 4, 4)                                       \
    X(agg_wire_endpoint_t, addr, 8, 128)
DEFINE_LAYOUT(endpoint, agg_wire_endpoint_t, 136, ENDPOINT_LAYOUT)

#define GROUP_CONFIG_LAYOUT(X)                                                 \
    X(agg_msg_group_config_t, group_id, 0, 4)                                  \
    X(agg_msg_group_config_t, job_id, 4, 4)                                    \
    X(agg_msg_group_config_t, num_members, 8, 4)                               \
    X(agg_msg_group_config_t, num_nodes, 12, 4)                                \
    X(agg_msg_group_config_t, osts, 16, 4)                                     \
    X(agg_msg_group_config_t, payload, 20, 4)                                  \
    X(agg_msg_group_config_t, tree, 24, 4)                                     \
    X(agg_msg_group_config_t, flags, 28, 4)                                    \
    X(agg_msg_group_config_t, part, 32, 4)                                     \
    X(agg_msg_group_config_t, num_ports, 36, 4)                                \
    X(agg_msg_group_config_t, job_key, 40, 8)
DEFINE_LAYOUT(group_config, agg_msg_group_config_t, 48, GROUP_CONFIG_LAYOUT)

#define PORT_LAYOUT(X)                                                         \
    X(agg_wire_port_t, kind, 0, 4) X(agg_wire_port_t, part, 4, 4)              \
    X(agg_wire_port_t, node, 8, 4) X(agg_wire_port_t, extra, 12, 4)            \
    X(agg_wire_port_t, addr, 16, 64)
DEFINE_LAYOUT(port, agg_wire_port_t, 80, PORT_LAYOUT)

#define SIM_REPORT_LAYOUT(X)                                                   \
    X(agg_msg_sim_report_t, what, 0, 4) X(agg_msg_sim_report_t, status, 4, 4)  \
    X(agg_msg_sim_report_t, addr, 8, 64)
DEFINE_LAYOUT(sim_report, agg_msg_sim_report_t, 72, SIM_REPORT_LAYOUT)

#define TREE_NODE_LAYOUT(X)                                                    \
    X(agg_wire_tree_node_t, guid, 0, 8)                                        \
    X(agg_wire_tree_node_t, parent, 8, 4)                                      \
    X(agg_wire_tree_node_t, extra, 12, 4)
DEFINE_LAYOUT(tree_node, agg_wire_tree_node_t, 16, TREE_NODE_LAYOUT)

#define MEMBER_LAYOUT(X) X(agg_wire_member_t, leaf, 0, 4) X(agg_wire_member_t, flags, 4, 4)
DEFINE_LAYOUT(member, agg_wire_member_t, 8, MEMBER_LAYOUT)

/* The embedded endpoint is pinned field by field, as its format letters walk it. */
#define GROUP_CONFIG_REPLY_LAYOUT(X)                                           \
    X(agg_msg_group_config_reply_t, status, 0, 4)                              \
    X(agg_msg_group_config_reply_t, group_id, 4, 4)                            \
    X(agg_msg_group_config_reply_t, tree, 8, 4)                                \
    X(agg_msg_group_config_reply_t, reserved, 12, 4)                           \
    X(agg_msg_group_config_reply_t, here.transport, 16, 4)                     \
    X(agg_msg_group_config_reply_t, here.length, 20, 4)                        \
    X(agg_msg_group_config_reply_t, here.addr, 24, 128)                        \
    X(agg_msg_group_config_reply_t, away.transport, 152, 4)                    \
    X(agg_msg_group_config_reply_t, away.length, 156, 4)                       \
    X(agg_msg_group_config_reply_t, away.addr, 160, 128)
DEFINE_LAYOUT(group_config_reply, agg_msg_group_config_reply_t, 288,
              GROUP_CONFIG_REPLY_LAYOUT)
PIN_STATIC(agg_msg_group_config_reply_t, here, 16, 136)
PIN_STATIC(agg_msg_group_config_reply_t, away, 152, 136)

#define GROUP_REF_LAYOUT(X)                                                    \
    X(agg_msg_group_ref_t, job_id, 0, 4)                                       \
    X(agg_msg_group_ref_t, group_id, 4, 4)                                     \
    X(agg_msg_group_ref_t, tree, 8, 4)                                         \
    X(agg_msg_group_ref_t, part, 12, 4)
DEFINE_LAYOUT(group_ref, agg_msg_group_ref_t, 16, GROUP_REF_LAYOUT)

#define JOB_CREATE_LAYOUT(X)                                                   \
    X(agg_msg_job_create_t, job_key, 0, 8)                                     \
    X(agg_msg_job_create_t, world_size, 8, 4)                                  \
    X(agg_msg_job_create_t, pid, 12, 4)                                        \
    X(agg_msg_job_create_t, quota_osts, 16, 4)                                 \
    X(agg_msg_job_create_t, quota_payload_per_ost, 20, 4)                      \
    X(agg_msg_job_create_t, quota_max_groups, 24, 4)                           \
    X(agg_msg_job_create_t, osts_per_group, 28, 4)                             \
    X(agg_msg_job_create_t, flags, 32, 4)                                      \
    X(agg_msg_job_create_t, num_hosts, 36, 4)                                  \
    X(agg_msg_job_create_t, host, 40, 64)                                      \
    X(agg_msg_job_create_t, device, 104, 64)
DEFINE_LAYOUT(job_create, agg_msg_job_create_t, 168, JOB_CREATE_LAYOUT)

#define JOB_CREATE_REPLY_LAYOUT(X)                                             \
    X(agg_msg_job_create_reply_t, status, 0, 4)                                \
    X(agg_msg_job_create_reply_t, job_id, 4, 4)                                \
    X(agg_msg_job_create_reply_t, tree_id, 8, 4)                               \
    X(agg_msg_job_create_reply_t, tree_depth, 12, 4)                           \
    X(agg_msg_job_create_reply_t, tree_nodes, 16, 4)                           \
    X(agg_msg_job_create_reply_t, osts, 20, 4)                                 \
    X(agg_msg_job_create_reply_t, payload_per_ost, 24, 4)                      \
    X(agg_msg_job_create_reply_t, max_groups, 28, 4)                           \
    X(agg_msg_job_create_reply_t, root_guid, 32, 8)                            \
    X(agg_msg_job_create_reply_t, sat_tree_id, 40, 4)                          \
    X(agg_msg_job_create_reply_t, sat_flows, 44, 4)                            \
    X(agg_msg_job_create_reply_t, shared_adapters, 48, 4)                      \
    X(agg_msg_job_create_reply_t, reserved, 52, 4)
DEFINE_LAYOUT(job_create_reply, agg_msg_job_create_reply_t, 56,
              JOB_CREATE_REPLY_LAYOUT)

#define JOB_REF_LAYOUT(X)                                                      \
    X(agg_msg_job_ref_t, job_id, 0, 4)                                         \
    X(agg_msg_job_ref_t, reserved, 4, 4)
DEFINE_LAYOUT(job_ref, agg_msg_job_ref_t, 8, JOB_REF_LAYOUT)

#define JOB_ATTACH_LAYOUT(X)                                                    \
    X(agg_msg_job_attach_t, job_key, 0, 8)                                     \
    X(agg_msg_job_attach_t, job_id, 8, 4)                                      \
    X(agg_msg_job_attach_t, world_rank, 12, 4)
DEFINE_LAYOUT(job_attach, agg_msg_job_attach_t, 16, JOB_ATTACH_LAYOUT)

#define SIM_PARTS_LAYOUT(X)                                                     \
    X(agg_msg_sim_parts_t, num_parts, 0, 4)                                    \
    X(agg_msg_sim_parts_t, reserved, 4, 4)
DEFINE_LAYOUT(sim_parts, agg_msg_sim_parts_t, 8, SIM_PARTS_LAYOUT)

#define GROUP_CREATE_LAYOUT(X)                                                 \
    X(agg_msg_group_create_t, job_id, 0, 4)                                    \
    X(agg_msg_group_create_t, num_members, 4, 4)                               \
    X(agg_msg_group_create_t, osts, 8, 4)                                      \
    X(agg_msg_group_create_t, flags, 12, 4)                                    \
    X(agg_msg_group_create_t, sat_osts, 16, 4)                                 \
    X(agg_msg_group_create_t, sat_payload, 20, 4)                              \
    X(agg_msg_group_create_t, job_key, 24, 8)
DEFINE_LAYOUT(group_create, agg_msg_group_create_t, 32, GROUP_CREATE_LAYOUT)

#define GROUP_CREATE_REPLY_LAYOUT(X)                                           \
    X(agg_msg_group_create_reply_t, status, 0, 4)                              \
    X(agg_msg_group_create_reply_t, group_id, 4, 4)                            \
    X(agg_msg_group_create_reply_t, num_members, 8, 4)                         \
    X(agg_msg_group_create_reply_t, num_trees, 12, 4)
DEFINE_LAYOUT(group_create_reply, agg_msg_group_create_reply_t, 16,
              GROUP_CREATE_REPLY_LAYOUT)

#define GROUP_TREE_LAYOUT(X)                                                   \
    X(agg_wire_group_tree_t, status, 0, 4)                                     \
    X(agg_wire_group_tree_t, tree, 4, 4)                                       \
    X(agg_wire_group_tree_t, tree_id, 8, 4)                                    \
    X(agg_wire_group_tree_t, osts, 12, 4)                                      \
    X(agg_wire_group_tree_t, payload, 16, 4)                                   \
    X(agg_wire_group_tree_t, depth, 20, 4)                                     \
    X(agg_wire_group_tree_t, nodes, 24, 4)                                     \
    X(agg_wire_group_tree_t, num_endpoints, 28, 4)                             \
    X(agg_wire_group_tree_t, root_guid, 32, 8)
DEFINE_LAYOUT(group_tree, agg_wire_group_tree_t, 40, GROUP_TREE_LAYOUT)

#define MEMBER_EP_LAYOUT(X)                                                    \
    X(agg_wire_member_ep_t, endpoint, 0, 4)                                    \
    X(agg_wire_member_ep_t, channel, 4, 4)                                     \
    X(agg_wire_member_ep_t, leaf_guid, 8, 8)
DEFINE_LAYOUT(member_ep, agg_wire_member_ep_t, 16, MEMBER_EP_LAYOUT)

#define STATS_REPLY_LAYOUT(X)                                                  \
    X(agg_msg_stats_reply_t, status, 0, 4)                                     \
    X(agg_msg_stats_reply_t, groups, 4, 4)                                     \
    X(agg_msg_stats_reply_t, fragments_in, 8, 8)                               \
    X(agg_msg_stats_reply_t, fragments_reduced, 16, 8)                         \
    X(agg_msg_stats_reply_t, results_out, 24, 8)                               \
    X(agg_msg_stats_reply_t, bytes_in, 32, 8)                                  \
    X(agg_msg_stats_reply_t, errors, 40, 8)                                    \
    X(agg_msg_stats_reply_t, groups_total, 48, 8)                              \
    X(agg_msg_stats_reply_t, llt_fragments_in, 56, 8)                          \
    X(agg_msg_stats_reply_t, sat_chunks_in, 64, 8)                             \
    X(agg_msg_stats_reply_t, sat_bytes_in, 72, 8)                              \
    X(agg_msg_stats_reply_t, duplicates, 80, 8)                                \
    X(agg_msg_stats_reply_t, locks_granted, 88, 8)                             \
    X(agg_msg_stats_reply_t, locks_busy, 96, 8)                                \
    X(agg_msg_stats_reply_t, zcopy_bytes, 104, 8)                              \
    X(agg_msg_stats_reply_t, faults, 112, 8)                                   \
    X(agg_msg_stats_reply_t, resent, 120, 8)                                   \
    X(agg_msg_stats_reply_t, corrupt, 128, 8)                                  \
    X(agg_msg_stats_reply_t, sat_groups, 136, 4)                               \
    X(agg_msg_stats_reply_t, workers, 140, 4)
DEFINE_LAYOUT(stats_reply, agg_msg_stats_reply_t, 144, STATS_REPLY_LAYOUT)

/*
 * shared memory (agg/dp.h): host byte order, no format string. The pad
 * arrays are fields like any other: they are what keeps the hot words of
 * different writers on lines of their own.
 */

#define DP_SEG_LAYOUT(X)                                                       \
    X(agg_dp_seg_t, magic, 0, 4)                                               \
    X(agg_dp_seg_t, version, 4, 4)                                             \
    X(agg_dp_seg_t, group_id, 8, 4)                                            \
    X(agg_dp_seg_t, tree, 12, 1)                                               \
    X(agg_dp_seg_t, flags, 13, 1)                                              \
    X(agg_dp_seg_t, reserved0, 14, 2)                                          \
    X(agg_dp_seg_t, num_members, 16, 4)                                        \
    X(agg_dp_seg_t, num_nodes, 20, 4)                                          \
    X(agg_dp_seg_t, window, 24, 4)                                             \
    X(agg_dp_seg_t, num_slots, 28, 4)                                          \
    X(agg_dp_seg_t, payload, 32, 4)                                            \
    X(agg_dp_seg_t, slot_stride, 36, 4)                                        \
    X(agg_dp_seg_t, stage_stride, 40, 4)                                       \
    X(agg_dp_seg_t, chan_stride, 44, 4)                                        \
    X(agg_dp_seg_t, members_off, 48, 8)                                        \
    X(agg_dp_seg_t, chans_off, 56, 8)                                          \
    X(agg_dp_seg_t, nodes_off, 64, 8)                                          \
    X(agg_dp_seg_t, ports_off, 72, 8)                                          \
    X(agg_dp_seg_t, slots_off, 80, 8)                                          \
    X(agg_dp_seg_t, bitmaps_off, 88, 8)                                        \
    X(agg_dp_seg_t, total_size, 96, 8)                                         \
    X(agg_dp_seg_t, num_ports, 104, 4)                                         \
    X(agg_dp_seg_t, dead, 108, 4)                                              \
    X(agg_dp_seg_t, pad1, 112, 16)                                             \
    X(agg_dp_seg_t, sleepers, 128, 4)                                          \
    X(agg_dp_seg_t, result_gen, 132, 4)                                        \
    X(agg_dp_seg_t, pad2, 136, 56)                                             \
    X(agg_dp_seg_t, work_gen, 192, 4)                                          \
    X(agg_dp_seg_t, pad3, 196, 60)
DEFINE_LAYOUT(dp_seg, agg_dp_seg_t, 256, DP_SEG_LAYOUT)

#define DP_MEMBER_LAYOUT(X)                                                    \
    X(agg_dp_member_t, leaf, 0, 4)                                             \
    X(agg_dp_member_t, position, 4, 4)                                         \
    X(agg_dp_member_t, pid, 8, 4)                                              \
    X(agg_dp_member_t, reserved, 12, 4)                                        \
    X(agg_dp_member_t, leaf_guid, 16, 8)                                       \
    X(agg_dp_member_t, reserved2, 24, 8)
DEFINE_LAYOUT(dp_member, agg_dp_member_t, 32, DP_MEMBER_LAYOUT)

#define DP_COUNTERS_LAYOUT(X)                                                  \
    X(agg_dp_counters_t, llt_fragments_in, 0, 8)                               \
    X(agg_dp_counters_t, sat_chunks_in, 8, 8)                                  \
    X(agg_dp_counters_t, bytes_in, 16, 8)                                      \
    X(agg_dp_counters_t, sat_bytes_in, 24, 8)                                  \
    X(agg_dp_counters_t, reductions, 32, 8)                                    \
    X(agg_dp_counters_t, results_out, 40, 8)                                   \
    X(agg_dp_counters_t, errors, 48, 8)                                        \
    X(agg_dp_counters_t, duplicates, 56, 8)                                    \
    X(agg_dp_counters_t, locks_granted, 64, 8)                                 \
    X(agg_dp_counters_t, locks_busy, 72, 8)                                    \
    X(agg_dp_counters_t, zcopy_bytes, 80, 8)                                   \
    X(agg_dp_counters_t, faults, 88, 8)                                        \
    X(agg_dp_counters_t, resent, 96, 8)                                        \
    X(agg_dp_counters_t, corrupt, 104, 8)                                      \
    X(agg_dp_counters_t, reserved, 112, 16)
DEFINE_LAYOUT(dp_counters, agg_dp_counters_t, 128, DP_COUNTERS_LAYOUT)

/* drv is one field here; what is inside it is agg_dp_counters_t's table. */
#define DP_CHAN_LAYOUT(X)                                                      \
    X(agg_dp_chan_t, consumed, 0, 8)                                           \
    X(agg_dp_chan_t, scan_lock, 8, 4)                                          \
    X(agg_dp_chan_t, pad0, 12, 52)                                             \
    X(agg_dp_chan_t, drv, 64, 128)
DEFINE_LAYOUT(dp_chan, agg_dp_chan_t, 192, DP_CHAN_LAYOUT)

#define FRAG_DESC_LAYOUT(X)                                                    \
    X(agg_frag_desc_t, count, 0, 4)                                            \
    X(agg_frag_desc_t, root, 4, 4)                                             \
    X(agg_frag_desc_t, total, 8, 4)                                            \
    X(agg_frag_desc_t, op, 12, 1)                                              \
    X(agg_frag_desc_t, dtype, 13, 1)                                           \
    X(agg_frag_desc_t, kind, 14, 1)                                            \
    X(agg_frag_desc_t, coll, 15, 1)
DEFINE_LAYOUT(frag_desc, agg_frag_desc_t, 16, FRAG_DESC_LAYOUT)

#define DP_FRAG_LAYOUT(X)                                                      \
    X(agg_dp_frag_t, n, 0, 8)                                                  \
    X(agg_dp_frag_t, desc, 8, 16)                                              \
    X(agg_dp_frag_t, flags, 24, 1)                                             \
    X(agg_dp_frag_t, reserved, 25, 3)                                          \
    X(agg_dp_frag_t, pid, 28, 4)                                               \
    X(agg_dp_frag_t, src, 32, 8)                                               \
    X(agg_dp_frag_t, dst, 40, 8)                                               \
    X(agg_dp_frag_t, off, 48, 4)                                               \
    X(agg_dp_frag_t, len, 52, 4)
DEFINE_LAYOUT(dp_frag, agg_dp_frag_t, 56, DP_FRAG_LAYOUT)

#define DP_NODE_LAYOUT(X)                                                      \
    X(agg_dp_node_t, guid, 0, 8)                                               \
    X(agg_dp_node_t, parent, 8, 4)                                             \
    X(agg_dp_node_t, position, 12, 4)                                          \
    X(agg_dp_node_t, expected, 16, 4)                                          \
    X(agg_dp_node_t, an, 20, 4)                                                \
    X(agg_dp_node_t, up, 24, 1)                                                \
    X(agg_dp_node_t, reserved, 25, 3)                                          \
    X(agg_dp_node_t, port, 28, 4)                                              \
    X(agg_dp_node_t, slots_off, 32, 8)                                         \
    X(agg_dp_node_t, bitmap_off, 40, 8)                                        \
    X(agg_dp_node_t, bitmap_words, 48, 4)                                      \
    X(agg_dp_node_t, num_down, 52, 4)                                          \
    X(agg_dp_node_t, down_first, 56, 4)                                        \
    X(agg_dp_node_t, reserved2, 60, 4)
DEFINE_LAYOUT(dp_node, agg_dp_node_t, 64, DP_NODE_LAYOUT)

#define DP_PORT_LAYOUT(X)                                                      \
    X(agg_dp_port_t, seg, 0, 64)                                               \
    X(agg_dp_port_t, node, 64, 4)                                              \
    X(agg_dp_port_t, position, 68, 4)                                          \
    X(agg_dp_port_t, kind, 72, 1)                                              \
    X(agg_dp_port_t, pad, 73, 55)
DEFINE_LAYOUT(dp_port, agg_dp_port_t, 128, DP_PORT_LAYOUT)
#define NET_MSG_LAYOUT(X)                                                      \
    X(agg_net_msg_t, magic, 0, 4) X(agg_net_msg_t, type, 4, 1)                 \
    X(agg_net_msg_t, tree, 5, 1) X(agg_net_msg_t, flags, 6, 1)                 \
    X(agg_net_msg_t, reserved, 7, 1) X(agg_net_msg_t, group_id, 8, 4)          \
    X(agg_net_msg_t, part, 12, 4) X(agg_net_msg_t, channel, 16, 4)             \
    X(agg_net_msg_t, status, 20, 4) X(agg_net_msg_t, n, 24, 8)                 \
    X(agg_net_msg_t, desc, 32, 16) X(agg_net_msg_t, extra, 48, 4)              \
    X(agg_net_msg_t, off, 52, 4) X(agg_net_msg_t, len, 56, 4)                  \
    X(agg_net_msg_t, bytes, 60, 4) X(agg_net_msg_t, csum, 64, 4)               \
    X(agg_net_msg_t, pad, 68, 4)
DEFINE_LAYOUT(net_msg, agg_net_msg_t, 72, NET_MSG_LAYOUT)

#define DP_SLOT_LAYOUT(X)                                                      \
    X(agg_dp_slot_t, state, 0, 4)                                              \
    X(agg_dp_slot_t, status, 4, 4)                                             \
    X(agg_dp_slot_t, done, 8, 8)                                               \
    X(agg_dp_slot_t, cur, 16, 8)                                               \
    X(agg_dp_slot_t, desc, 24, 16)                                             \
    X(agg_dp_slot_t, flags, 40, 1)                                             \
    X(agg_dp_slot_t, pad, 41, 7)                                               \
    X(agg_dp_slot_t, seen, 48, 8)                                              \
    X(agg_dp_slot_t, moved, 56, 8)
DEFINE_LAYOUT(dp_slot, agg_dp_slot_t, 64, DP_SLOT_LAYOUT)

#define DP_AN_LAYOUT(X)                                                        \
    X(agg_dp_an_t, guid, 0, 8)                                                 \
    X(agg_dp_an_t, sat_lock, 8, 4)                                             \
    X(agg_dp_an_t, reserved, 12, 4)                                            \
    X(agg_dp_an_t, sat_lock_taken, 16, 8)                                      \
    X(agg_dp_an_t, pad, 24, 40)
DEFINE_LAYOUT(dp_an, agg_dp_an_t, 64, DP_AN_LAYOUT)

#define DP_HOST_LAYOUT(X)                                                      \
    X(agg_dp_host_t, magic, 0, 4)                                              \
    X(agg_dp_host_t, version, 4, 4)                                            \
    X(agg_dp_host_t, num_ans, 8, 4)                                            \
    X(agg_dp_host_t, workers, 12, 4)                                           \
    X(agg_dp_host_t, pid, 16, 4)                                               \
    X(agg_dp_host_t, pad0, 20, 44)                                             \
    X(agg_dp_host_t, doorbell, 64, 4)                                          \
    X(agg_dp_host_t, sleeping, 68, 4)                                          \
    X(agg_dp_host_t, pad1, 72, 56)
DEFINE_LAYOUT(dp_host, agg_dp_host_t, 128, DP_HOST_LAYOUT)

typedef struct struct_pin {
    const char        *name;
    size_t             size, want_size;
    const char        *fmt; /* NULL: shared memory, host order */
    const field_pin_t *fields;
    size_t             num_fields;
} struct_pin_t;

#define STRUCT(_id, _t, _size, _fmt) \
    {#_t, sizeof(_t), (_size), (_fmt), _id##_fields, \
     sizeof(_id##_fields) / sizeof(_id##_fields[0])}

static const struct_pin_t structs[] = {
    STRUCT(hdr, agg_msg_hdr_t, 16, AGG_FMT_HDR),
    STRUCT(status, agg_msg_status_t, 4, AGG_FMT_STATUS),
    STRUCT(hello, agg_msg_hello_t, 72, AGG_FMT_HELLO),
    STRUCT(hello_reply, agg_msg_hello_reply_t, 16, AGG_FMT_HELLO_REPLY),
    STRUCT(sim_register, agg_msg_sim_register_t, 152, AGG_FMT_SIM_REGISTER),
    STRUCT(sim_register_reply, agg_msg_sim_register_reply_t, 16,
           AGG_FMT_SIM_REGISTER_REPLY),
    STRUCT(switch, agg_wire_switch_t, 72, AGG_FMT_SWITCH),
    STRUCT(endpoint, agg_wire_endpoint_t, 136, AGG_FMT_ENDPOINT),
    STRUCT(group_config, agg_msg_group_config_t, 48, AGG_FMT_GROUP_CONFIG),
    STRUCT(port, agg_wire_port_t, 80, AGG_FMT_PORT),
    STRUCT(sim_report, agg_msg_sim_report_t, 72, AGG_FMT_SIM_REPORT),
    STRUCT(tree_node, agg_wire_tree_node_t, 16, AGG_FMT_TREE_NODE),
    STRUCT(member, agg_wire_member_t, 8, AGG_FMT_MEMBER),
    STRUCT(group_config_reply, agg_msg_group_config_reply_t, 288,
           AGG_FMT_GROUP_CONFIG_REPLY),
    STRUCT(group_ref, agg_msg_group_ref_t, 16, AGG_FMT_GROUP_REF),
    STRUCT(job_create, agg_msg_job_create_t, 168, AGG_FMT_JOB_CREATE),
    STRUCT(job_create_reply, agg_msg_job_create_reply_t, 56, AGG_FMT_JOB_CREATE_REPLY),
    STRUCT(job_ref, agg_msg_job_ref_t, 8, AGG_FMT_JOB_REF),
    STRUCT(job_attach, agg_msg_job_attach_t, 16, AGG_FMT_JOB_ATTACH),
    STRUCT(sim_parts, agg_msg_sim_parts_t, 8, AGG_FMT_SIM_PARTS),
    STRUCT(group_create, agg_msg_group_create_t, 32, AGG_FMT_GROUP_CREATE),
    STRUCT(group_create_reply, agg_msg_group_create_reply_t, 16,
           AGG_FMT_GROUP_CREATE_REPLY),
    STRUCT(group_tree, agg_wire_group_tree_t, 40, AGG_FMT_GROUP_TREE),
    STRUCT(member_ep, agg_wire_member_ep_t, 16, AGG_FMT_MEMBER_EP),
    STRUCT(stats_reply, agg_msg_stats_reply_t, 144, AGG_FMT_STATS_REPLY),
    STRUCT(dp_seg, agg_dp_seg_t, 256, NULL),
    STRUCT(dp_member, agg_dp_member_t, 32, NULL),
    STRUCT(dp_counters, agg_dp_counters_t, 128, NULL),
    STRUCT(dp_chan, agg_dp_chan_t, 192, NULL),
    STRUCT(frag_desc, agg_frag_desc_t, 16, NULL),
    STRUCT(dp_frag, agg_dp_frag_t, 56, NULL),
    STRUCT(dp_node, agg_dp_node_t, 64, NULL),
    STRUCT(dp_port, agg_dp_port_t, 128, NULL),
    STRUCT(net_msg, agg_net_msg_t, 72, NULL),
    STRUCT(dp_slot, agg_dp_slot_t, 64, NULL),
    STRUCT(dp_an, agg_dp_an_t, 64, NULL),
    STRUCT(dp_host, agg_dp_host_t, 128, NULL),
};

#define NUM_STRUCTS (sizeof(structs) / sizeof(structs[0]))

/* Rows above with a format: one per AGG_FMT_* in agg/wire.h. */
#define NUM_FORMATS 25

#define MAX_FIELDS 32 /* the most fields a pinned struct has, rounded up */

/* ---- constants ------------------------------------------------------ */

/* Numbers both ends agree on: magics, versions, lengths, enum values, flag bits. */
#define CONSTANTS(X)                                                           \
    X(AGG_WIRE_MAGIC, 0x4147474d) X(AGG_WIRE_VERSION, 6)                       \
    X(AGG_WIRE_MAX_BODY, 1048576) X(AGG_WIRE_NAME_LEN, 64)                     \
    X(AGG_WIRE_EP_ADDR_LEN, 128)                                               \
    X(AGG_SIM_REPORT_LINK_DOWN, 1)                                             \
    X(AGG_PEER_CLIENT, 1) X(AGG_PEER_SIM, 2) X(AGG_PEER_TOOL, 3)               \
    X(AGG_TL_SHM, 1) X(AGG_TL_TCP, 2)                                          \
    X(AGG_TREE_LLT, 0) X(AGG_TREE_SAT, 1)                                      \
    X(AGG_GROUP_F_SAT, 0x01) X(AGG_GROUP_F_REPRODUCIBLE, 0x02)                 \
    X(AGG_JOB_F_SAT, 0x01) X(AGG_JOB_F_SPREAD, 0x02)                           \
    X(AGG_DP_MAGIC, 0x50444741) X(AGG_DP_HOST_MAGIC, 0x54534841)               \
    X(AGG_DP_VERSION, 7) X(AGG_DP_LINE, 64) X(AGG_DP_NAME_LEN, 64)             \
    X(AGG_DP_KIND_DATA, 0) X(AGG_DP_KIND_LOCK, 1) X(AGG_DP_KIND_UNLOCK, 2)     \
    X(AGG_DP_KIND__COUNT, 3)                                                   \
    X(AGG_DP_F_REPRODUCIBLE, 0x01)                                             \
    X(AGG_DP_UP_ROOT, 0) X(AGG_DP_UP_LOCAL, 1) X(AGG_DP_UP_SHM, 2)             \
    X(AGG_DP_FRAG_CMA, 0x01) X(AGG_DP_FRAG_FAILED, 0x02)                       \
    X(AGG_DP_FRAG_EMPTY, 0x04) X(AGG_DP_SLOT_FILLED, 0x02)                     \
    X(AGG_DP_COLL_ALLREDUCE, 0) X(AGG_DP_COLL_REDUCE, 1) X(AGG_DP_COLL_BCAST, 2) \
    X(AGG_DP_COLL_BARRIER, 3) X(AGG_DP_COLL_REDUCE_SCATTER, 4)                 \
    X(AGG_DP_COLL_ALLGATHER, 5) X(AGG_DP_COLL__COUNT, 6)                       \
    X(AGG_DP_FRAG_SIZE, 64)                                                    \
    X(AGG_DP_SLOT_LOCKED, 0x80000000) X(AGG_DP_SLOT_PENDING, 0x01)             \
    X(AGG_DP_SLOT_HDR, 64) X(AGG_DP_ACC_FACTOR, 2)

#define CONST_STATIC(_c, _v) _Static_assert((_c) == (_v), #_c);
CONSTANTS(CONST_STATIC)

#define CONST_ROW(_c, _v) {#_c, (unsigned long long)(_c), (_v)},
static const struct {
    const char        *name;
    unsigned long long value, want;
} constants[] = {CONSTANTS(CONST_ROW)};

/*
 * The data-path structs are cut into cache lines so that words written by
 * different drivers never share one; their sizes and the lines their hot
 * words start, as the comments in agg/dp.h say, in AGG_DP_LINE units.
 */
#define DP_LINES(X)                                                            \
    X(sizeof(agg_dp_seg_t), 4 * AGG_DP_LINE)                                   \
    X(offsetof(agg_dp_seg_t, nodes_off), 1 * AGG_DP_LINE)                      \
    X(offsetof(agg_dp_seg_t, sleepers), 2 * AGG_DP_LINE)                       \
    X(offsetof(agg_dp_seg_t, work_gen), 3 * AGG_DP_LINE)                       \
    X(sizeof(agg_dp_an_t), AGG_DP_LINE)                                        \
    X(sizeof(agg_dp_host_t), 2 * AGG_DP_LINE)                                  \
    X(offsetof(agg_dp_host_t, doorbell), AGG_DP_LINE)                          \
    X(sizeof(agg_dp_node_t), AGG_DP_LINE)                                      \
    X(sizeof(agg_dp_counters_t), 2 * AGG_DP_LINE)                              \
    X(offsetof(agg_dp_chan_t, drv), AGG_DP_LINE)                               \
    X(sizeof(agg_dp_chan_t), AGG_DP_LINE + sizeof(agg_dp_counters_t))          \
    X(sizeof(agg_dp_slot_t), AGG_DP_SLOT_HDR)

#define LINE_STATIC(_got, _want) _Static_assert((_got) == (_want), #_got " == " #_want);
DP_LINES(LINE_STATIC)

#define LINE_ROW(_got, _want) {#_got, #_want, (_got), (_want)},
static const struct {
    const char *got_name, *want_name;
    size_t      got, want;
} dp_lines[] = {DP_LINES(LINE_ROW)};

/* room: what the constants must hold */
_Static_assert(AGG_WIRE_EP_ADDR_LEN % AGG_WIRE_NAME_LEN == 0, "an address is whole 's' letters");
_Static_assert(2 * AGG_DP_NAME_LEN <= AGG_WIRE_EP_ADDR_LEN, "an SHM address holds two names");
_Static_assert(sizeof(agg_dp_frag_t) <= AGG_DP_FRAG_SIZE, "staged fragment header room");
_Static_assert(AGG_DP_FRAG_SIZE % AGG_DP_LINE == 0, "staged payload line-aligned");
_Static_assert(AGG_DP_SLOT_HDR % 8 == 0, "accumulator 8-byte aligned");

typedef struct type_pin {
    unsigned    value, want;
    const char *name;
} type_pin_t;

#define TYPE(_t, _v) {AGG_MSG_##_t, (_v), #_t},

#define MSG_TYPES(X)                                                           \
    X(HELLO, 1) X(HELLO_REPLY, 2) X(SIM_REGISTER, 3) X(SIM_REGISTER_REPLY, 4)  \
    X(GROUP_CONFIG, 5) X(GROUP_CONFIG_REPLY, 6) X(GROUP_TEARDOWN, 7)           \
    X(GROUP_TEARDOWN_REPLY, 8) X(JOB_CREATE, 9) X(JOB_CREATE_REPLY, 10)        \
    X(JOB_DESTROY, 11) X(JOB_DESTROY_REPLY, 12) X(GROUP_CREATE, 13)            \
    X(GROUP_CREATE_REPLY, 14) X(GROUP_DESTROY, 15) X(GROUP_DESTROY_REPLY, 16)  \
    X(STATS, 17) X(STATS_REPLY, 18) X(ERROR_REPLY, 19) X(SIM_REPORT, 20)      \
    X(STATE, 21) X(STATE_REPLY, 22) X(JOB_ATTACH, 23) X(JOB_ATTACH_REPLY, 24) \
    X(SIM_PARTS, 25) X(SIM_PARTS_REPLY, 26)

#define TYPE_STATIC(_t, _v) _Static_assert(AGG_MSG_##_t == (_v), "AGG_MSG_" #_t);
MSG_TYPES(TYPE_STATIC)
_Static_assert(AGG_MSG__MAX == 27, "AGG_MSG__MAX");

static const type_pin_t msg_types[] = {MSG_TYPES(TYPE)};

/* Statuses travel in every reply body, so their numbers are wire format too. */
#define STATUSES(X)                                                            \
    X(AGG_OK, 0) X(AGG_INPROGRESS, 1)                                          \
    X(AGG_ERR_GENERIC, -100) X(AGG_ERR_NOT_SUPPORTED, -101)                    \
    X(AGG_ERR_NO_MEMORY, -102) X(AGG_ERR_INVALID_PARAM, -103)                  \
    X(AGG_ERR_IO, -104) X(AGG_ERR_TIMEOUT, -105) X(AGG_ERR_CONFIG, -106)       \
    X(AGG_ERR_PARSE, -107) X(AGG_ERR_NOT_FOUND, -108) X(AGG_ERR_OOB, -109)     \
    X(AGG_ERR_SHUTDOWN, -110) X(AGG_ERR_DEVICE, -111)                          \
    X(AGG_ERR_SESSION_INIT, -200) X(AGG_ERR_PROTOCOL, -201)                    \
    X(AGG_ERR_VERSION, -202) X(AGG_ERR_JOB_CREATE, -203)                       \
    X(AGG_ERR_NO_JOB, -204) X(AGG_ERR_NO_SWITCHSIM, -205)                      \
    X(AGG_ERR_TOPOLOGY, -206) X(AGG_ERR_AUTH, -207)                            \
    X(AGG_ERR_QUOTA, -300) X(AGG_ERR_NO_RESOURCE, -301)                        \
    X(AGG_ERR_GROUP_ALLOC, -302) X(AGG_ERR_GROUP_ID, -303)                     \
    X(AGG_ERR_NO_TREE, -304) X(AGG_ERR_GROUP_JOIN, -305)                       \
    X(AGG_ERR_DATA_MISMATCH, -400) X(AGG_ERR_BAD_FRAGMENT, -401)

#define STATUS_STATIC(_s, _v) _Static_assert(_s == (_v), #_s);
STATUSES(STATUS_STATIC)

#define STATUS_ROW(_s, _v) {_s, #_s},
static const struct {
    agg_status_t status;
    const char  *name;
} statuses[] = {STATUSES(STATUS_ROW)};

/* ---- helpers -------------------------------------------------------- */

static size_t fmt_letter_size(char c)
{
    switch (c) {
    case 'h': return 2;
    case 'l': return 4;
    case 'q': return 8;
    case 's': return AGG_WIRE_NAME_LEN;
    }
    return 0;
}

static void assert_bytes(const void *got, const uint8_t *want, size_t len)
{
    const uint8_t *g = got;
    size_t i;

    for (i = 0; i < len; i++) {
        if (g[i] != want[i]) {
            fail_msg("byte %zu is 0x%02x, expected 0x%02x", i, g[i], want[i]);
        }
    }
}

static void make_pair(int fds[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
}

static void close_pair(int fds[2])
{
    if (fds[0] >= 0) {
        close(fds[0]);
    }
    if (fds[1] >= 0) {
        close(fds[1]);
    }
}

/* ---- 1. sizes and offsets -------------------------------------------- */

static void test_layout_pinned(void **state)
{
    size_t s, f;

    for (s = 0; s < NUM_STRUCTS; s++) {
        const struct_pin_t *sp = &structs[s];
        size_t end = 0;

        if (sp->size != sp->want_size) {
            fail_msg("sizeof(%s) is %zu, pinned %zu", sp->name, sp->size, sp->want_size);
        }
        for (f = 0; f < sp->num_fields; f++) {
            const field_pin_t *fp = &sp->fields[f];

            if (fp->off != fp->want_off || fp->size != fp->want_size) {
                fail_msg("%s.%s is %zu bytes at %zu, pinned %zu bytes at %zu", sp->name,
                         fp->name, fp->size, fp->off, fp->want_size, fp->want_off);
            }
            /* fields listed in order and no hole between them */
            if (fp->off != end) {
                fail_msg("%s.%s at %zu, previous field ends at %zu", sp->name, fp->name,
                         fp->off, end);
            }
            end = fp->off + fp->size;
        }
        if (end != sp->size) {
            fail_msg("%s: fields end at %zu, struct is %zu (tail padding)", sp->name, end,
                     sp->size);
        }
    }
}

static void test_constants(void **state)
{
    size_t i;

    for (i = 0; i < sizeof(constants) / sizeof(constants[0]); i++) {
        if (constants[i].value != constants[i].want) {
            fail_msg("%s is 0x%llx, pinned 0x%llx", constants[i].name, constants[i].value,
                     constants[i].want);
        }
    }
    for (i = 0; i < sizeof(dp_lines) / sizeof(dp_lines[0]); i++) {
        if (dp_lines[i].got != dp_lines[i].want) {
            fail_msg("%s is %zu, expected %s = %zu", dp_lines[i].got_name, dp_lines[i].got,
                     dp_lines[i].want_name, dp_lines[i].want);
        }
    }
    assert_int_equal(AGG_WIRE_EP_ADDR_LEN % AGG_WIRE_NAME_LEN, 0);
    assert_true(2 * AGG_DP_NAME_LEN <= AGG_WIRE_EP_ADDR_LEN);
    assert_true(sizeof(agg_dp_frag_t) <= AGG_DP_FRAG_SIZE);
    assert_int_equal(AGG_DP_FRAG_SIZE % AGG_DP_LINE, 0);
    assert_int_equal(AGG_DP_SLOT_HDR % 8, 0);

    assert_int_equal(sizeof(msg_types) / sizeof(msg_types[0]), AGG_MSG__MAX - 1);
    for (i = 0; i < sizeof(msg_types) / sizeof(msg_types[0]); i++) {
        if (msg_types[i].value != msg_types[i].want) {
            fail_msg("AGG_MSG_%s is %u, pinned %u", msg_types[i].name, msg_types[i].value,
                     msg_types[i].want);
        }
    }
    assert_int_equal(AGG_MSG__MAX, 27);
}

/* ---- 2. format strings ---------------------------------------------- */

/*
 * Walks sp's format along its pinned fields: an integer field takes one
 * letter of its size, a byte array one 's' per AGG_WIRE_NAME_LEN bytes (an
 * endpoint address takes two). Fills letter[f] with field f's first letter;
 * fails where the format and the fields disagree.
 */
static void fmt_walk(const struct_pin_t *sp, char *letter)
{
    const char *c = sp->fmt;
    size_t f, off = 0;

    for (f = 0; f < sp->num_fields; f++) {
        const field_pin_t *fp = &sp->fields[f];
        size_t first = (size_t)(c - sp->fmt), covered = 0;

        if (*c == '\0') {
            fail_msg("format \"%s\" ends at %zu bytes, %s.%s is %zu bytes at %zu", sp->fmt,
                     off, sp->name, fp->name, fp->size, fp->off);
        }
        if (fmt_letter_size(*c) == 0) {
            fail_msg("format \"%s\": unknown letter '%c'", sp->fmt, *c);
        }
        letter[f] = *c;
        if (*c == 's') {
            while (*c == 's' && covered < fp->size) {
                covered += fmt_letter_size(*c++);
            }
        } else {
            covered = fmt_letter_size(*c++);
        }
        if (off != fp->off || covered != fp->size) {
            fail_msg("format \"%s\" letters %zu..%zu '%c' (%zu bytes at %zu) do not "
                     "match %s.%s (%zu bytes at %zu)",
                     sp->fmt, first, (size_t)(c - sp->fmt) - 1, letter[f], covered, off,
                     sp->name, fp->name, fp->size, fp->off);
        }
        off += covered;
    }
    if (*c != '\0') {
        fail_msg("format \"%s\" has letters from %zu past the last field of %s", sp->fmt,
                 (size_t)(c - sp->fmt), sp->name);
    }
}

static void test_formats_match_structs(void **state)
{
    size_t s, num_formats = 0;

    for (s = 0; s < NUM_STRUCTS; s++) {
        const struct_pin_t *sp = &structs[s];
        char letter[MAX_FIELDS];
        uint8_t buf[512];

        if (sp->fmt == NULL) {
            continue;
        }
        num_formats++;
        if (agg_wire_fmt_size(sp->fmt) != sp->size) {
            fail_msg("format \"%s\" covers %zu bytes, sizeof(%s) is %zu", sp->fmt,
                     agg_wire_fmt_size(sp->fmt), sp->name, sp->size);
        }
        assert_true(sp->num_fields <= MAX_FIELDS);
        fmt_walk(sp, letter);
        assert_true(sp->size <= sizeof(buf));
        memset(buf, 0, sizeof(buf));
        assert_int_equal(agg_wire_swap(buf, sp->fmt, 1), sp->size);
    }
    /* a new AGG_FMT_* gets a row in structs[] */
    assert_int_equal(num_formats, NUM_FORMATS);
    assert_int_equal(agg_wire_fmt_size(""), 0);
}

/* ---- 3. byte order -------------------------------------------------- */

static void test_hdr_encode_bytes(void **state)
{
    static const uint8_t want[16] = {0x41, 0x47, 0x47, 0x4d, /* "AGGM" */
                                     0x00, 0x06,             /* version */
                                     0x00, 0x09,             /* JOB_CREATE */
                                     0x01, 0x02, 0x03, 0x04, /* length */
                                     0xa1, 0xb2, 0xc3, 0xd4}; /* txid */
    agg_msg_hdr_t hdr;

    agg_wire_hdr_encode(&hdr, AGG_MSG_JOB_CREATE, 0x01020304, 0xa1b2c3d4);
    assert_bytes(&hdr, want, sizeof(want));

    /* decode is the inverse; the length here is over the limit, so use a legal one */
    agg_wire_hdr_encode(&hdr, AGG_MSG_STATS_REPLY, 120, 0xa1b2c3d4);
    assert_int_equal(agg_wire_hdr_decode(&hdr), AGG_OK);
    assert_int_equal(hdr.magic, AGG_WIRE_MAGIC);
    assert_int_equal(hdr.version, AGG_WIRE_VERSION);
    assert_int_equal(hdr.type, AGG_MSG_STATS_REPLY);
    assert_int_equal(hdr.length, 120);
    assert_int_equal(hdr.txid, 0xa1b2c3d4);
}

/* A whole JOB_CREATE body as libagg sends it: the fixed part, two host names, three ranks. */
static void test_swap_job_create_bytes(void **state)
{
    static const uint8_t want_fixed[40] = {
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* job_key */
        0x11, 0x12, 0x13, 0x14,                         /* world_size */
        0x21, 0x22, 0x23, 0x24,                         /* pid */
        0x31, 0x32, 0x33, 0x34,                         /* quota_osts */
        0x41, 0x42, 0x43, 0x44,                         /* quota_payload_per_ost */
        0x51, 0x52, 0x53, 0x54,                         /* quota_max_groups */
        0x61, 0x62, 0x63, 0x64,                         /* osts_per_group */
        0x00, 0x00, 0x00, 0x03,                         /* flags: SAT | SPREAD */
        0x00, 0x00, 0x00, 0x02,                         /* num_hosts */
    };
    static const uint8_t want_ranks[12] = {0x00, 0x00, 0x00, 0x01,  /* rank 0 on host 1 */
                                           0x00, 0x00, 0x00, 0x00,  /* rank 1 on host 0 */
                                           0x00, 0x00, 0x00, 0x01}; /* rank 2 on host 1 */
    uint8_t body[168 + 2 * 64 + 3 * 4], orig[sizeof(body)];
    agg_msg_job_create_t m;
    uint32_t ranks[3] = {1, 0, 1};
    uint8_t *names = body + sizeof(m);
    size_t i;

    _Static_assert(sizeof(m) == 168, "fixed part");
    memset(&m, 0, sizeof(m));
    m.job_key               = 0x0102030405060708ull;
    m.world_size            = 0x11121314;
    m.pid                   = 0x21222324;
    m.quota_osts            = 0x31323334;
    m.quota_payload_per_ost = 0x41424344;
    m.quota_max_groups      = 0x51525354;
    m.osts_per_group        = 0x61626364;
    m.flags                 = AGG_JOB_F_SAT | AGG_JOB_F_SPREAD;
    m.num_hosts             = 2;
    for (i = 0; i < sizeof(m.host); i++) {
        m.host[i]   = (char)(0x80 + i); /* every byte distinct, no NUL */
        m.device[i] = (char)(0xc0 + i);
    }
    memcpy(body, &m, sizeof(m));
    for (i = 0; i < 2 * AGG_WIRE_NAME_LEN; i++) {
        names[i] = (uint8_t)(0x20 + i % 0x5f); /* printable, no NUL */
    }
    memcpy(names + 2 * AGG_WIRE_NAME_LEN, ranks, sizeof(ranks));
    memcpy(orig, body, sizeof(body));

    assert_int_equal(agg_wire_swap(body, AGG_FMT_JOB_CREATE, 1), 168);
    assert_int_equal(agg_wire_swap(names + 2 * AGG_WIRE_NAME_LEN, "l", 3), 12);
    assert_bytes(body, want_fixed, sizeof(want_fixed));
    for (i = 0; i < 64; i++) {
        /* the strings are not swapped */
        if (body[40 + i] != (uint8_t)(0x80 + i) || body[104 + i] != (uint8_t)(0xc0 + i)) {
            fail_msg("host/device byte %zu is 0x%02x/0x%02x after swap", i, body[40 + i],
                     body[104 + i]);
        }
    }
    assert_memory_equal(names, orig + 168, 2 * AGG_WIRE_NAME_LEN);
    assert_bytes(names + 2 * AGG_WIRE_NAME_LEN, want_ranks, sizeof(want_ranks));

    assert_int_equal(agg_wire_swap(body, AGG_FMT_JOB_CREATE, 1), 168);
    assert_int_equal(agg_wire_swap(names + 2 * AGG_WIRE_NAME_LEN, "l", 3), 12);
    assert_memory_equal(body, orig, sizeof(body));
}

static void test_swap_signed_and_arrays(void **state)
{
    static const uint8_t want_stats[24] = {
        0xff, 0xff, 0xff, 0x37,                         /* -201 */
        0x00, 0x00, 0x00, 0x02,                         /* groups */
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* fragments_in */
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, /* fragments_reduced */
    };
    static const uint8_t want_stats_tail[8] = {
        0x00, 0x00, 0x00, 0x05, /* sat_groups */
        0x00, 0x00, 0x01, 0x00, /* workers */
    };
    static const uint8_t want_nodes[32] = {
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0xff, 0xff, 0xff, 0xff,
        0x00, 0x00, 0x00, 0x00,                                               /* root */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
        0xde, 0xad, 0xbe, 0xef,                                               /* child */
    };
    agg_msg_stats_reply_t st = {0};
    agg_wire_group_tree_t gt = {0};
    agg_wire_tree_node_t nodes[3];
    agg_msg_hello_t hello = {0};

    st.status            = AGG_ERR_PROTOCOL;
    st.groups            = 2;
    st.fragments_in      = 0x0102030405060708ull;
    st.fragments_reduced = UINT64_MAX - 1;
    st.sat_groups        = 5;
    st.workers           = 256;
    assert_int_equal(agg_wire_swap(&st, AGG_FMT_STATS_REPLY, 1), 144);
    assert_bytes(&st, want_stats, sizeof(want_stats));
    assert_bytes((uint8_t *)&st + 136, want_stats_tail, sizeof(want_stats_tail));
    agg_wire_swap(&st, AGG_FMT_STATS_REPLY, 1);
    assert_int_equal(st.status, AGG_ERR_PROTOCOL);
    assert_int_equal(st.workers, 256);

    /* a refused SAT tree in a GROUP_CREATE_REPLY: its status is negative */
    gt.status = AGG_ERR_NO_RESOURCE;
    gt.tree   = AGG_TREE_SAT;
    assert_int_equal(agg_wire_swap(&gt, AGG_FMT_GROUP_TREE, 1), 40);
    assert_bytes(&gt, (const uint8_t[8]){0xff, 0xff, 0xfe, 0xd3, 0, 0, 0, 1}, 8);

    /* count > 1 walks consecutive structs and stops after the last */
    memset(nodes, 0x5a, sizeof(nodes));
    nodes[0] = (agg_wire_tree_node_t){.guid = 0x1122334455667788ull, .parent = -1};
    nodes[1] = (agg_wire_tree_node_t){.guid = 2, .parent = 0, .extra = 0xdeadbeef};
    assert_int_equal(agg_wire_swap(nodes, AGG_FMT_TREE_NODE, 2), 32);
    assert_bytes(nodes, want_nodes, sizeof(want_nodes));
    assert_bytes(&nodes[2], (const uint8_t[16]){0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a,
                                                0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a,
                                                0x5a, 0x5a},
                 16);
    assert_int_equal(agg_wire_swap(nodes, AGG_FMT_TREE_NODE, 0), 0);

    /* a NUL-padded name stays readable on the wire */
    hello.kind = AGG_PEER_CLIENT;
    hello.pid  = 4242;
    snprintf(hello.host, sizeof(hello.host), "node-17");
    agg_wire_swap(&hello, AGG_FMT_HELLO, 1);
    assert_bytes(&hello, (const uint8_t[8]){0, 0, 0, 1, 0, 0, 0x10, 0x92}, 8);
    assert_string_equal(hello.host, "node-17");
}

/* Every format: integers come out byte-reversed, strings untouched, twice is identity. */
static void test_swap_every_format(void **state)
{
    size_t s, f, i;

    for (s = 0; s < NUM_STRUCTS; s++) {
        const struct_pin_t *sp = &structs[s];
        uint8_t orig[512], buf[512];
        char letter[MAX_FIELDS];

        if (sp->fmt == NULL) {
            continue;
        }
        assert_true(sp->num_fields <= MAX_FIELDS);
        fmt_walk(sp, letter);
        for (i = 0; i < sp->size; i++) {
            orig[i] = (uint8_t)(i * 7 + s + 1);
        }
        memcpy(buf, orig, sp->size);
        assert_int_equal(agg_wire_swap(buf, sp->fmt, 1), sp->size);
        for (f = 0; f < sp->num_fields; f++) {
            const field_pin_t *fp = &sp->fields[f];

            for (i = 0; i < fp->size; i++) {
                uint8_t want = letter[f] == 's' ? orig[fp->off + i]
                                                : orig[fp->off + fp->size - 1 - i];

                if (buf[fp->off + i] != want) {
                    fail_msg("%s.%s byte %zu is 0x%02x after swap, expected 0x%02x",
                             sp->name, fp->name, i, buf[fp->off + i], want);
                }
            }
        }
        agg_wire_swap(buf, sp->fmt, 1);
        assert_memory_equal(buf, orig, sp->size);
    }
}

/* ---- 4. header decode ----------------------------------------------- */

static agg_status_t decode_raw(uint32_t magic, uint16_t version, uint32_t length)
{
    agg_msg_hdr_t hdr = {.magic = magic, .version = version, .type = AGG_MSG_HELLO,
                         .length = length, .txid = 1};

    agg_wire_swap(&hdr, AGG_FMT_HDR, 1);
    return agg_wire_hdr_decode(&hdr);
}

static void test_hdr_decode_checks(void **state)
{
    agg_msg_hdr_t hdr;

    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, AGG_WIRE_VERSION, 0), AGG_OK);
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, AGG_WIRE_VERSION, AGG_WIRE_MAX_BODY), AGG_OK);
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, AGG_WIRE_VERSION, AGG_WIRE_MAX_BODY + 1),
                     AGG_ERR_PROTOCOL);
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, AGG_WIRE_VERSION, UINT32_MAX),
                     AGG_ERR_PROTOCOL);
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, 0, 0), AGG_ERR_VERSION);
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, 1, 0), AGG_ERR_VERSION); /* a version 1 peer */
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, 2, 0), AGG_ERR_VERSION); /* before shared_adapters */
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, 3, 0), AGG_ERR_VERSION); /* before TCP members */
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, 4, 0), AGG_ERR_VERSION); /* before SIM_REPORT */
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, 5, 0), AGG_ERR_VERSION); /* aggmgr wrote TCP endpoints */
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, 7, 0), AGG_ERR_VERSION);
    assert_int_equal(decode_raw(AGG_WIRE_MAGIC, 0x0100, 0), AGG_ERR_VERSION);
    assert_int_equal(decode_raw(0, AGG_WIRE_VERSION, 0), AGG_ERR_PROTOCOL);
    /* a host-order (unswapped) magic is not accepted */
    assert_int_equal(decode_raw(0x4d474741u, AGG_WIRE_VERSION, 0), AGG_ERR_PROTOCOL);
    /* magic is checked before version */
    assert_int_equal(decode_raw(0x12345678u, 7, 0), AGG_ERR_PROTOCOL);

    agg_wire_hdr_encode(&hdr, AGG_MSG_HELLO, 0, 1);
    ((uint8_t *)&hdr)[3] ^= 1;
    assert_int_equal(agg_wire_hdr_decode(&hdr), AGG_ERR_PROTOCOL);
}

/* ---- 5. messages over a socket -------------------------------------- */

static void test_msg_roundtrip(void **state)
{
    static const uint8_t want_hdr[16] = {0x41, 0x47, 0x47, 0x4d, 0x00, 0x06, 0x00, 0x01,
                                         0x00, 0x00, 0x00, 0x48, 0x00, 0x00, 0x00, 0x4d};
    agg_msg_hello_t hello = {.kind = AGG_PEER_SIM, .pid = 31337}, got;
    agg_msg_hdr_t hdr;
    uint8_t raw[16 + sizeof(hello)];
    uint8_t big[200];
    int fds[2];

    make_pair(fds);
    snprintf(hello.host, sizeof(hello.host), "host-a");
    agg_wire_swap(&hello, AGG_FMT_HELLO, 1);

    /* what goes on the socket: the big-endian header, then the body as given */
    assert_int_equal(agg_msg_send(fds[0], AGG_MSG_HELLO, 77, &hello, sizeof(hello), 1000),
                     AGG_OK);
    assert_int_equal(agg_sock_recv_all(fds[1], raw, sizeof(raw), 1000), AGG_OK);
    assert_bytes(raw, want_hdr, sizeof(want_hdr));
    assert_memory_equal(raw + 16, &hello, sizeof(hello));

    /* recv with cap exactly the body size */
    assert_int_equal(agg_msg_send(fds[0], AGG_MSG_HELLO, 77, &hello, sizeof(hello), 1000),
                     AGG_OK);
    memset(&got, 0, sizeof(got));
    assert_int_equal(agg_msg_recv(fds[1], &hdr, &got, sizeof(got), 1000), AGG_OK);
    assert_int_equal(hdr.magic, AGG_WIRE_MAGIC);
    assert_int_equal(hdr.version, AGG_WIRE_VERSION);
    assert_int_equal(hdr.type, AGG_MSG_HELLO);
    assert_int_equal(hdr.length, sizeof(hello));
    assert_int_equal(hdr.txid, 77);
    agg_wire_swap(&got, AGG_FMT_HELLO, 1);
    assert_int_equal(got.kind, AGG_PEER_SIM);
    assert_int_equal(got.pid, 31337);
    assert_string_equal(got.host, "host-a");

    /* back-to-back messages keep their boundaries; an empty body is legal */
    assert_int_equal(agg_msg_send(fds[0], AGG_MSG_STATS, 5, NULL, 0, 1000), AGG_OK);
    memset(big, 0xab, sizeof(big));
    assert_int_equal(agg_msg_send(fds[0], AGG_MSG_GROUP_CREATE, 6, big, 100, 1000), AGG_OK);
    assert_int_equal(agg_msg_recv(fds[1], &hdr, NULL, 0, 1000), AGG_OK);
    assert_int_equal(hdr.type, AGG_MSG_STATS);
    assert_int_equal(hdr.length, 0);
    assert_int_equal(hdr.txid, 5);
    memset(big, 0, sizeof(big));
    assert_int_equal(agg_msg_recv(fds[1], &hdr, big, sizeof(big), 1000), AGG_OK);
    assert_int_equal(hdr.type, AGG_MSG_GROUP_CREATE);
    assert_int_equal(hdr.length, 100);
    assert_int_equal(hdr.txid, 6);
    assert_int_equal(big[0], 0xab);
    assert_int_equal(big[99], 0xab);
    assert_int_equal(big[100], 0); /* nothing past the body */

    close_pair(fds);
}

static void test_msg_over_cap(void **state)
{
    uint8_t body[100] = {0}, out[99];
    agg_msg_hdr_t hdr;
    uint8_t probe;
    int fds[2];

    make_pair(fds);
    assert_int_equal(agg_msg_send(fds[0], AGG_MSG_GROUP_CREATE, 1, body, sizeof(body), 1000),
                     AGG_OK);
    assert_int_equal(agg_msg_recv(fds[1], &hdr, out, sizeof(out), 1000), AGG_ERR_PROTOCOL);
    close_pair(fds);

    /* the sender refuses a body no receiver may accept, and writes nothing */
    make_pair(fds);
    assert_int_equal(agg_msg_send(fds[0], AGG_MSG_GROUP_CREATE, 2, body,
                                  (size_t)AGG_WIRE_MAX_BODY + 1, 1000),
                     AGG_ERR_INVALID_PARAM);
    assert_int_equal(recv(fds[1], &probe, 1, MSG_DONTWAIT), -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    close_pair(fds);
}

static void test_msg_bad_header_from_peer(void **state)
{
    agg_msg_hdr_t raw, hdr;
    uint8_t body[8];
    int fds[2];

    make_pair(fds);
    raw = (agg_msg_hdr_t){.magic = 0x41424344, .version = AGG_WIRE_VERSION, .type = 1};
    agg_wire_swap(&raw, AGG_FMT_HDR, 1);
    assert_int_equal(write(fds[0], &raw, sizeof(raw)), sizeof(raw));
    assert_int_equal(agg_msg_recv(fds[1], &hdr, body, sizeof(body), 1000), AGG_ERR_PROTOCOL);

    raw = (agg_msg_hdr_t){.magic = AGG_WIRE_MAGIC, .version = 1, .type = 1};
    agg_wire_swap(&raw, AGG_FMT_HDR, 1);
    assert_int_equal(write(fds[0], &raw, sizeof(raw)), sizeof(raw));
    assert_int_equal(agg_msg_recv(fds[1], &hdr, body, sizeof(body), 1000), AGG_ERR_VERSION);

    /* a huge length is refused before anything is read into the body */
    raw = (agg_msg_hdr_t){.magic = AGG_WIRE_MAGIC, .version = AGG_WIRE_VERSION, .type = 1,
                          .length = UINT32_MAX};
    agg_wire_swap(&raw, AGG_FMT_HDR, 1);
    assert_int_equal(write(fds[0], &raw, sizeof(raw)), sizeof(raw));
    assert_int_equal(agg_msg_recv(fds[1], &hdr, body, sizeof(body), 1000), AGG_ERR_PROTOCOL);
    close_pair(fds);
}

static void test_msg_truncated(void **state)
{
    agg_msg_hdr_t enc, hdr;
    uint8_t body[32];
    int fds[2];

    /* half a header, then the peer goes away */
    make_pair(fds);
    agg_wire_hdr_encode(&enc, AGG_MSG_HELLO, 0, 1);
    assert_int_equal(write(fds[0], &enc, 8), 8);
    close(fds[0]);
    fds[0] = -1;
    assert_int_equal(agg_msg_recv(fds[1], &hdr, body, sizeof(body), 1000), AGG_ERR_IO);
    close_pair(fds);

    /* a whole header promising 32 bytes, 10 of them, then close */
    make_pair(fds);
    agg_wire_hdr_encode(&enc, AGG_MSG_HELLO, 32, 1);
    memset(body, 1, sizeof(body));
    assert_int_equal(write(fds[0], &enc, sizeof(enc)), sizeof(enc));
    assert_int_equal(write(fds[0], body, 10), 10);
    close(fds[0]);
    fds[0] = -1;
    assert_int_equal(agg_msg_recv(fds[1], &hdr, body, sizeof(body), 1000), AGG_ERR_IO);
    close_pair(fds);

    /* nothing at all */
    make_pair(fds);
    close(fds[0]);
    fds[0] = -1;
    assert_int_equal(agg_msg_recv(fds[1], &hdr, body, sizeof(body), 1000), AGG_ERR_IO);
    close_pair(fds);
}

static void test_msg_timeout(void **state)
{
    agg_msg_hdr_t enc, hdr;
    uint8_t body[32];
    int64_t t0, dt;
    int fds[2];

    make_pair(fds);
    t0 = agg_time_ms();
    assert_int_equal(agg_msg_recv(fds[1], &hdr, body, sizeof(body), 50), AGG_ERR_TIMEOUT);
    dt = agg_time_ms() - t0;
    assert_true(dt >= 45);
    assert_true(dt < 1000);

    /* a header whose body never comes: still bounded */
    agg_wire_hdr_encode(&enc, AGG_MSG_HELLO, 16, 1);
    assert_int_equal(write(fds[0], &enc, sizeof(enc)), sizeof(enc));
    t0 = agg_time_ms();
    assert_int_equal(agg_msg_recv(fds[1], &hdr, body, sizeof(body), 50), AGG_ERR_TIMEOUT);
    dt = agg_time_ms() - t0;
    assert_true(dt >= 45);
    assert_true(dt < 1000);
    close_pair(fds);
}

/* A peer that answers one request the way `mode` says. */
enum peer_mode { PEER_OK, PEER_BAD_TXID, PEER_BAD_TYPE, PEER_ERROR_REPLY, PEER_EMPTY,
                 PEER_SILENT };

typedef struct peer {
    int            fd;
    enum peer_mode mode;
    agg_status_t   recv_st, send_st;
    agg_msg_hdr_t  req;
    uint8_t        body[256];
} peer_t;

static void *peer_main(void *arg)
{
    peer_t *p = arg;
    agg_msg_hello_reply_t reply = {.status = AGG_OK, .mgr_pid = 99, .num_switches = 3,
                                   .num_cas = 4};
    agg_msg_status_t err = {.status = AGG_ERR_PROTOCOL};
    uint32_t txid;

    p->recv_st = agg_msg_recv(p->fd, &p->req, p->body, sizeof(p->body), 2000);
    if (p->recv_st != AGG_OK) {
        return NULL;
    }
    txid = p->req.txid;
    agg_wire_swap(&reply, AGG_FMT_HELLO_REPLY, 1);
    agg_wire_swap(&err, AGG_FMT_STATUS, 1);
    switch (p->mode) {
    case PEER_OK:
        p->send_st = agg_msg_send(p->fd, AGG_MSG_HELLO_REPLY, txid, &reply, sizeof(reply), 2000);
        break;
    case PEER_BAD_TXID:
        p->send_st = agg_msg_send(p->fd, AGG_MSG_HELLO_REPLY, txid + 1, &reply, sizeof(reply),
                                  2000);
        break;
    case PEER_BAD_TYPE:
        p->send_st = agg_msg_send(p->fd, AGG_MSG_STATS_REPLY, txid, &reply, sizeof(reply), 2000);
        break;
    case PEER_ERROR_REPLY:
        p->send_st = agg_msg_send(p->fd, AGG_MSG_ERROR_REPLY, txid, &err, sizeof(err), 2000);
        break;
    case PEER_EMPTY:
        p->send_st = agg_msg_send(p->fd, AGG_MSG_HELLO_REPLY, txid, NULL, 0, 2000);
        break;
    case PEER_SILENT:
        p->send_st = AGG_OK;
        break;
    }
    return NULL;
}

static agg_status_t call_with_peer(enum peer_mode mode, int timeout_ms, peer_t *p,
                                   agg_msg_hello_reply_t *reply, size_t *reply_len)
{
    agg_msg_hello_t hello = {.kind = AGG_PEER_TOOL, .pid = 7};
    pthread_t thread;
    agg_status_t st;
    int fds[2];

    make_pair(fds);
    memset(p, 0, sizeof(*p));
    p->fd   = fds[1];
    p->mode = mode;
    snprintf(hello.host, sizeof(hello.host), "caller");
    agg_wire_swap(&hello, AGG_FMT_HELLO, 1);
    assert_int_equal(pthread_create(&thread, NULL, peer_main, p), 0);
    *reply_len = 0;
    st = agg_msg_call(fds[0], AGG_MSG_HELLO, &hello, sizeof(hello), AGG_MSG_HELLO_REPLY, reply,
                      sizeof(*reply), reply_len, timeout_ms);
    assert_int_equal(pthread_join(thread, NULL), 0);
    close_pair(fds);
    /* whatever the reply, the request itself arrived intact */
    assert_int_equal(p->recv_st, AGG_OK);
    assert_int_equal(p->send_st, AGG_OK);
    assert_int_equal(p->req.type, AGG_MSG_HELLO);
    assert_int_equal(p->req.length, sizeof(hello));
    assert_memory_equal(p->body, &hello, sizeof(hello));
    return st;
}

static void test_msg_call(void **state)
{
    agg_msg_hello_reply_t reply;
    uint32_t first_txid;
    size_t len;
    peer_t p;
    int64_t t0;

    memset(&reply, 0, sizeof(reply));
    assert_int_equal(call_with_peer(PEER_OK, 2000, &p, &reply, &len), AGG_OK);
    assert_int_equal(len, sizeof(reply));
    agg_wire_swap(&reply, AGG_FMT_HELLO_REPLY, 1);
    assert_int_equal(reply.status, AGG_OK);
    assert_int_equal(reply.mgr_pid, 99);
    assert_int_equal(reply.num_switches, 3);
    assert_int_equal(reply.num_cas, 4);
    first_txid = p.req.txid;

    /* each call draws a fresh txid */
    assert_int_equal(call_with_peer(PEER_OK, 2000, &p, &reply, &len), AGG_OK);
    assert_int_not_equal(p.req.txid, first_txid);

    assert_int_equal(call_with_peer(PEER_BAD_TXID, 2000, &p, &reply, &len), AGG_ERR_PROTOCOL);
    assert_int_equal(call_with_peer(PEER_BAD_TYPE, 2000, &p, &reply, &len), AGG_ERR_PROTOCOL);
    assert_int_equal(call_with_peer(PEER_EMPTY, 2000, &p, &reply, &len), AGG_ERR_PROTOCOL);

    /* ERROR_REPLY is an answer, not a failure of the call: the status is in the body */
    memset(&reply, 0, sizeof(reply));
    assert_int_equal(call_with_peer(PEER_ERROR_REPLY, 2000, &p, &reply, &len), AGG_OK);
    assert_int_equal(len, sizeof(agg_msg_status_t));
    agg_wire_swap(&reply, AGG_FMT_STATUS, 1);
    assert_int_equal(reply.status, AGG_ERR_PROTOCOL);

    t0 = agg_time_ms();
    assert_int_equal(call_with_peer(PEER_SILENT, 50, &p, &reply, &len), AGG_ERR_TIMEOUT);
    assert_true(agg_time_ms() - t0 < 1000);
}

/* ---- 6. names ------------------------------------------------------- */

static void test_msg_type_names(void **state)
{
    static const unsigned unknown[] = {0, AGG_MSG__MAX, AGG_MSG__MAX + 1, 0xffff, UINT_MAX};
    size_t i;

    for (i = 0; i < sizeof(msg_types) / sizeof(msg_types[0]); i++) {
        assert_string_equal(agg_msg_type_name(msg_types[i].value), msg_types[i].name);
    }
    for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        assert_string_equal(agg_msg_type_name(unknown[i]), "UNKNOWN");
    }
}

static void test_status_strings(void **state)
{
    const char *unknown = agg_status_string((agg_status_t)-999);
    size_t n = sizeof(statuses) / sizeof(statuses[0]);
    size_t a, b;

    assert_non_null(unknown);
    assert_non_null(agg_status_string((agg_status_t)12345));
    for (a = 0; a < n; a++) {
        const char *s = agg_status_string(statuses[a].status);

        if (s == NULL || s[0] == '\0') {
            fail_msg("%s has no description", statuses[a].name);
        }
        if (strcmp(s, unknown) == 0) {
            fail_msg("%s is described as an unknown status", statuses[a].name);
        }
        for (b = 0; b < a; b++) {
            if (strcmp(s, agg_status_string(statuses[b].status)) == 0) {
                fail_msg("%s and %s share the description \"%s\"", statuses[a].name,
                         statuses[b].name, s);
            }
        }
    }
}

/* ---- 7. the stats file ---------------------------------------------- */

/* A value for field f of the stats reply that no other field has and that fills its width. */
static uint64_t stats_value(size_t f, size_t size)
{
    return size == 8 ? 0xf000000000000000ull + f * 0x0101010101ull : 0x80000000u + f;
}

/*
 * switchsim's --stats-file and agg_info -S: one "name value" line for every
 * counter of the STATS_REPLY (every field but the status), named as its
 * field. Scripts read these names, so they are pinned here.
 */
static void test_stats_print(void **state)
{
    static const char *const named[] = {"fragments_in", "llt_fragments_in", "sat_chunks_in",
                                        "sat_bytes_in"};
    const size_t n = sizeof(stats_reply_fields) / sizeof(stats_reply_fields[0]);
    unsigned seen[MAX_FIELDS] = {0};
    agg_msg_stats_reply_t st;
    char out[4096], *line, *save = NULL;
    size_t f, i, lines = 0;
    FILE *file;

    assert_true(n <= MAX_FIELDS);
    assert_string_equal(stats_reply_fields[0].name, "status");
    memset(&st, 0, sizeof(st));
    st.status = AGG_ERR_GENERIC; /* not a counter */
    for (f = 1; f < n; f++) {
        const field_pin_t *fp = &stats_reply_fields[f];
        uint64_t v64 = stats_value(f, fp->size);
        uint32_t v32 = (uint32_t)v64;

        memcpy((uint8_t *)&st + fp->off, fp->size == 8 ? (void *)&v64 : (void *)&v32, fp->size);
    }

    memset(out, 0, sizeof(out));
    file = fmemopen(out, sizeof(out), "w");
    assert_non_null(file);
    agg_wire_stats_print(&st, file);
    assert_int_equal(fclose(file), 0);
    assert_true(strlen(out) < sizeof(out) - 1);
    assert_true(strlen(out) > 0 && out[strlen(out) - 1] == '\n');

    for (line = strtok_r(out, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char *space = strchr(line, ' '), *end;
        unsigned long long value;

        lines++;
        if (space == NULL || space == line || space[1] < '0' || space[1] > '9') {
            fail_msg("stats line %zu \"%s\" is not \"name value\"", lines, line);
        }
        *space = '\0';
        errno  = 0;
        value  = strtoull(space + 1, &end, 10);
        if (errno != 0 || *end != '\0') {
            fail_msg("stats line %zu: \"%s\" has value \"%s\"", lines, line, space + 1);
        }
        for (f = 1; f < n && strcmp(stats_reply_fields[f].name, line) != 0; f++) {
        }
        if (f == n) {
            fail_msg("stats line %zu names \"%s\", not a counter of agg_msg_stats_reply_t",
                     lines, line);
        }
        if (seen[f]++ != 0) {
            fail_msg("stats line %zu: \"%s\" printed twice", lines, line);
        }
        if (value != stats_value(f, stats_reply_fields[f].size)) {
            fail_msg("stats line %zu: %s is %llu, the reply says %llu", lines, line, value,
                     (unsigned long long)stats_value(f, stats_reply_fields[f].size));
        }
    }
    for (f = 1; f < n; f++) {
        if (seen[f] == 0) {
            fail_msg("counter %s is not printed", stats_reply_fields[f].name);
        }
    }
    assert_int_equal(lines, n - 1);
    for (i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        for (f = 1; f < n && strcmp(stats_reply_fields[f].name, named[i]) != 0; f++) {
        }
        if (f == n || seen[f] != 1) {
            fail_msg("no \"%s\" line", named[i]);
        }
    }
}

/* TCP endpoints: what switchsim offers, members read back; anything else is refused. */
/*
 * The data path's checksum: CRC32C of the header (csum as 0) and the data,
 * the known check value of the algorithm, and every single bit flipped in
 * header (its length aside) or data caught.
 */
static void test_net_csum(void **state)
{
    uint8_t data[40], buf[sizeof(agg_net_msg_t) + sizeof(data)];
    agg_net_msg_t m = {.magic = AGG_NET_MAGIC, .type = AGG_NET_PUSH, .group_id = 7, .n = 99,
                       .bytes = sizeof(data)};
    size_t i, bit;

    (void)state;
    for (i = 0; i < sizeof(data); ++i) {
        data[i] = (uint8_t)(i * 37);
    }
    {
        /* CRC32C of "123456789" is 0xe3069283 (RFC 3720's check value): the
           header of zeros aside, the library is the CRC it says it is */
        uint32_t c = crc32_iscsi((unsigned char *)"123456789", 9, 0xffffffffu) ^ 0xffffffffu;
        assert_int_equal(c, 0xe3069283u);
    }
    agg_net_seal(&m, data);
    assert_true(agg_net_intact(&m, data));
    memcpy(buf, &m, sizeof(m));
    memcpy(buf + sizeof(m), data, sizeof(data));
    for (i = 0; i < sizeof(buf); ++i) {
        for (bit = 0; bit < 8; ++bit) {
            agg_net_msg_t h;

            buf[i] ^= (uint8_t)(1u << bit);
            memcpy(&h, buf, sizeof(h));
            /* (a flipped length reads other bytes: not this test's) */
            if (h.bytes == m.bytes && agg_net_intact(&h, buf + sizeof(h))) {
                fail_msg("byte %zu bit %zu flipped, and the checksum still matches", i, bit);
            }
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
}

static void test_net_endpoint(void **state)
{
    agg_wire_endpoint_t w;
    char why[256];
    agg_net_ep_t ep;
    static const char *const bad[] = {"10.0.0.1:7126", "10.0.0.1/g1/t0/p0", "10.0.0.1:0/g1/t0/p0",
                                      "10.0.0.1:7126/g1/t0", "10.0.0.1:7126/g1/t0/p0x",
                                      ":7126/g1/t0/p0", "[::1:7126/g1/t0/p0",
                                      "10.0.0.1:99999/g1/t0/p0"};
    size_t i;

    (void)state;
    assert_int_equal(agg_net_ep_format(&w, "10.77.0.3:7126", 42, 1, 3), AGG_OK);
    assert_int_equal(w.transport, AGG_TL_TCP);
    assert_int_equal(w.length, strlen("10.77.0.3:7126/g42/t1/p3") + 1);
    assert_int_equal(agg_net_ep_parse(w.addr, w.length, &ep, why, sizeof(why)), AGG_OK);
    assert_string_equal(ep.host, "10.77.0.3");
    assert_int_equal(ep.port, 7126);
    assert_int_equal(ep.group_id, 42);
    assert_int_equal(ep.tree, 1);
    assert_int_equal(ep.part, 3);
    assert_int_equal(agg_net_ep_format(&w, "[fd00::2]:7126", 7, 0, 0), AGG_OK);
    assert_int_equal(agg_net_ep_parse(w.addr, w.length, &ep, why, sizeof(why)), AGG_OK);
    assert_string_equal(ep.host, "fd00::2");
    /* too long to fit is said, not cut */
    memset(why, 'x', sizeof(why));
    why[sizeof(w.addr)] = '\0';
    assert_int_equal(agg_net_ep_format(&w, why, 42, 1, 3), AGG_ERR_PARSE);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        why[0] = '\0';
        assert_int_equal(agg_net_ep_parse(bad[i], strlen(bad[i]) + 1, &ep, why, sizeof(why)),
                         AGG_ERR_PARSE);
        assert_true(why[0] != '\0');
    }
    /* no NUL within the length */
    assert_int_equal(agg_net_ep_parse("10.0.0.1:1/g1/t0/p0", 5, &ep, why, sizeof(why)),
                     AGG_ERR_PARSE);
}

/* Shared-memory endpoints: two names, each with its NUL, within the length. */
static void test_shm_endpoint(void **state)
{
    agg_wire_endpoint_t w;
    const char *seg, *host;
    char why[256], name[AGG_WIRE_EP_ADDR_LEN];

    (void)state;
    assert_int_equal(agg_dp_ep_format(&w, "/agg-g7-t0-p0", "/agg-host-1"), AGG_OK);
    assert_int_equal(w.transport, AGG_TL_SHM);
    assert_int_equal(agg_dp_ep_parse(&w, &seg, &host, why, sizeof(why)), AGG_OK);
    assert_string_equal(seg, "/agg-g7-t0-p0");
    assert_string_equal(host, "/agg-host-1");
    /* names that do not fit are refused, not cut */
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    assert_int_equal(agg_dp_ep_format(&w, name, "/h"), AGG_ERR_PARSE);
    /* one name only, a length beyond the address, no NUL: refused with a reason */
    assert_int_equal(agg_dp_ep_format(&w, "/seg", "/host"), AGG_OK);
    w.length = 5;
    why[0] = '\0';
    assert_int_equal(agg_dp_ep_parse(&w, &seg, &host, why, sizeof(why)), AGG_ERR_PARSE);
    assert_true(why[0] != '\0');
    w.length = sizeof(w.addr) + 1;
    assert_int_equal(agg_dp_ep_parse(&w, &seg, &host, why, sizeof(why)), AGG_ERR_PARSE);
    memset(w.addr, 'a', sizeof(w.addr));
    w.length = sizeof(w.addr);
    assert_int_equal(agg_dp_ep_parse(&w, &seg, &host, why, sizeof(why)), AGG_ERR_PARSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_pinned),
        cmocka_unit_test(test_constants),
        cmocka_unit_test(test_formats_match_structs),
        cmocka_unit_test(test_hdr_encode_bytes),
        cmocka_unit_test(test_swap_job_create_bytes),
        cmocka_unit_test(test_swap_signed_and_arrays),
        cmocka_unit_test(test_swap_every_format),
        cmocka_unit_test(test_hdr_decode_checks),
        cmocka_unit_test(test_msg_roundtrip),
        cmocka_unit_test(test_msg_over_cap),
        cmocka_unit_test(test_msg_bad_header_from_peer),
        cmocka_unit_test(test_msg_truncated),
        cmocka_unit_test(test_msg_timeout),
        cmocka_unit_test(test_msg_call),
        cmocka_unit_test(test_msg_type_names),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_stats_print),
        cmocka_unit_test(test_net_csum),
        cmocka_unit_test(test_net_endpoint),
        cmocka_unit_test(test_shm_endpoint),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
