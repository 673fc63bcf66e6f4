/* The leaf role on TNA (../v1model/uplink.p4 explains the role; docs/tofino.md, "The leaf
 * role on TNA", says how it is laid over the passes and why it keeps the one-pass
 * invariant). Built where P4REDUCE_LEAF_ROLE is set (bridge.p4). The same `uplink` table
 * and actions as v1model's, so controlplane/uplink.py programs both. No register of its
 * own: what v1model keeps in result_held, TNA reads from two registers it has anyway.
 *
 * - The packet that completes a leaf's round becomes a RESULT as on one switch and takes
 *   the read-out pass, which reads the round's low lanes and fingerprint minimum -- the
 *   leaf's partial, whole -- and sends it up by the uplink (bridge `up`) instead of to the
 *   ranks. That pass stores no winner, so round_winner goes on naming round r.
 * - A rank's retransmission to a complete round becomes a cached RESULT. While round r
 *   waits for the spine's result, round_winner names it, so the winner check takes the
 *   packet (in_round): the result is not held, and the partial goes up again,
 *   FLAG_RETRANSMIT. Once the spine's RESULT has passed its read-out pass, round_winner
 *   names round r + 1 (the job's winner): the result is held, and the cached RESULT is the
 *   spine's, from the round's cells. (The job's first round on a slot, whose ANNOUNCE is
 *   taken without a winner check, always goes up: the spine answers from its cache.)
 * - The spine's RESULT reads its round's half of the bitmap (its bitmap step changes
 *   nothing) and, when the round is complete here, overwrites the round's lanes, next key
 *   and fingerprint range with its own (the steps' overwrite, LANE_OP_STORE) in its first
 *   pass; it then goes to the ranks through the read-out pass, which stores the job's
 *   winner. Storing the same RESULT twice writes the same values; a copy that finds the
 *   round's half no longer complete (a later round runs in it) ends. */
#ifndef P4REDUCE_TNA_UPLINK_P4
#define P4REDUCE_TNA_UPLINK_P4
#if P4REDUCE_LEAF_ROLE

/* switch -> worker, on a STATUS only (the bit FLAG_CACHED has on a RESULT): the spine's
 * STATUS, relayed by the rank's leaf to its ranks (../v1model/uplink.p4 defines the same) */
const flags_t FLAG_RELAYED = 0x04;

/* The job's uplink: looked up for every pass (the read-out pass addresses the partial) */
control Uplink(inout headers_t hdr, inout metadata_t meta) {
    action set_uplink(PortId_t port, mac_t spine_mac, ipv4_addr_t spine_ip, rank_t rank) {
        meta.has_uplink = 1;
        meta.uplink_port = port;
        meta.uplink_mac = spine_mac;
        meta.uplink_ip = spine_ip;
        meta.uplink_rank = rank;
    }
    action no_uplink() {
        meta.has_uplink = 0;
    }
    table uplink {
        key = { hdr.p4r.job: exact @name("job"); }
        actions = { set_uplink; no_uplink; }
        default_action = no_uplink();
        size = MAX_JOBS;
    }

    apply {
        uplink.apply();
    }
}

/* A first pass's downlink flag, and the xors that say whether it came from the uplink
 * (bridge.p4: uplink_port and uplink_ip become 0 exactly then) */
control FromUplink(inout headers_t hdr, inout metadata_t meta, in PortId_t ingress_port) {
    action compare_uplink() {
        meta.uplink_port = meta.uplink_port ^ ingress_port;
        meta.uplink_ip = meta.uplink_ip ^ hdr.ipv4.src_addr;
    }

    action from_spine() {
        meta.spine_result = 1;
    }
    /* a RESULT or STATUS from the uplink: one const table, not two gateways */
    table spine_check {
        key = { meta.downlink: exact; meta.has_uplink: exact; meta.uplink_port: exact;
                meta.uplink_ip: exact; }
        actions = { from_spine; NoAction; }
        const entries = { (1, 1, 0, 0): from_spine(); }
        const default_action = NoAction();
        size = 1;
    }
    apply {
        meta.downlink = 0;
        if (hdr.p4r.msg_type == MSG_RESULT || hdr.p4r.msg_type == MSG_STATUS) {
            meta.downlink = 1;
        }
        compare_uplink();
        meta.spine_result = 0;
        spine_check.apply();
    }
}

/* What the leaf role adds to P4ReduceIngress itself (the read-out pass's actions write
 * the intrinsic metadata for the traffic manager). */
#define LEAF_ROLE_DECLARATIONS                                                 \
    /* the spine's RESULT: its round's steps overwrite (LANE_OP_STORE) when the \
     * round is complete here (the bitmap's answer) */                         \
    action store_result() {                                                    \
        meta.lane_op = LANE_OP_STORE;                                          \
    }                                                                          \
    /* the read-out pass sends the leaf's partial up: the uplink's addresses and \
     * the leaf's rank in the spine's job; its sources are the switch's already */ \
    action send_up() {                                                         \
        hdr.p4r.rank = meta.uplink_rank;                                       \
        hdr.ethernet.dst_addr = meta.uplink_mac;                               \
        hdr.ipv4.dst_addr = meta.uplink_ip;                                    \
        hdr.udp.src_port = P4REDUCE_UDP_BASE;                                  \
        hdr.udp.dst_port = P4REDUCE_UDP_BASE;                                  \
        ig_tm_md.ucast_egress_port = meta.uplink_port;                         \
        hdr.bridge.to_worker = 0;                                              \
        hdr.bridge.multicast = 0;                                              \
        hdr.bridge.harvest = 0;                                                \
    }                                                                          \
    /* the partial's message type and flags, from what it carries, whether it \
     * answers a retransmission (the cached RESULT) and the first pass's       \
     * FLAG_CONTINUED (a restarted spine marks the slot lost by it) */         \
    action set_partial(msg_type_t msg_type, flags_t flags) {                   \
        hdr.p4r.protocol = PROTOCOL_VERSION;                                   \
        hdr.p4r.msg_type = msg_type;                                           \
        hdr.p4r.flags = flags;                                                 \
    }                                                                          \
    table partial_header {                                                     \
        key = { hdr.fingerprint.isValid(): exact @name("announce");            \
                hdr.p4r.flags[2:2]: exact @name("cached");                     \
                hdr.bridge.continued: exact @name("continued"); }              \
        actions = { set_partial; }                                             \
        const entries = {                                                      \
            (false, 0, 0): set_partial(MSG_DATA, 0);                           \
            (false, 0, 1): set_partial(MSG_DATA, FLAG_CONTINUED);              \
            (false, 1, 0): set_partial(MSG_DATA, FLAG_RETRANSMIT);             \
            (false, 1, 1): set_partial(MSG_DATA, FLAG_RETRANSMIT | FLAG_CONTINUED); \
            (true, 0, 0): set_partial(MSG_ANNOUNCE, 0);                        \
            (true, 0, 1): set_partial(MSG_ANNOUNCE, FLAG_CONTINUED);           \
            (true, 1, 0): set_partial(MSG_ANNOUNCE, FLAG_RETRANSMIT);          \
            (true, 1, 1): set_partial(MSG_ANNOUNCE, FLAG_RETRANSMIT | FLAG_CONTINUED); \
        }                                                                      \
        size = 8;                                                              \
    }
#else
#define LEAF_ROLE_DECLARATIONS
#endif
#endif
