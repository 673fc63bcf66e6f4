/* Result and replication on TNA (../v1model/result.p4 explains them; same counters). A
 * RESULT leaves through one recirculated pass, the read-out pass (round_winner.p4), which
 * reads the low lanes of its pairs (or the fingerprint minimum) and then multicasts it, or
 * unicasts it to the port the request came from. */
#ifndef P4REDUCE_TNA_RESULT_P4
#define P4REDUCE_TNA_RESULT_P4

/* A reply's flags. Every packet of a silent job carries FLAG_SILENT both ways
 * (docs/protocol.md section 6): with silent rounds built, a reply keeps the admitted
 * packet's bit 6 and writes the rest (a lanes job's FLAG_PACKED, bit 5, is 0). */
#if P4REDUCE_SILENT_ROUNDS
#define SET_REPLY_FLAGS(F) hdr.p4r.flags[5:0] = (F)[5:0];
#else
#define SET_REPLY_FLAGS(F) hdr.p4r.flags = F;
#endif

control Result(inout headers_t hdr, inout metadata_t meta,
               in ingress_intrinsic_metadata_t ig_intr_md,
               inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
               inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) aggregated;
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) rounds_completed;
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) retransmissions_served;
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) duplicates;
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) overflows;
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) state_lost;
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) stale;

    /* NextBlock left the round's key (next_block[23:0] ++ ~next_exponent) in next_block.
     * A Tofino ALU writes a container with one kind of instruction per action: the
     * exponent is written before make_result shifts the block into place. The
     * header-writing actions also rewrite `protocol` (already checked to be
     * PROTOCOL_VERSION), so that only slot_version stays unwritten in the first 16 bits (a
     * write must leave one contiguous part of a container alone). */
    action invert_exponent() {
        hdr.p4r.next_exponent = ~hdr.p4r.next_block[7:0];
    }
    action make_result(bit<7> extra_flags) {
#if P4REDUCE_LEAF_ROLE
        hdr.bridge.continued = hdr.p4r.flags[3:3];     /* a leaf's partial carries it */
#endif
        meta.to_worker = 1;
        hdr.p4r.protocol = PROTOCOL_VERSION;
        hdr.p4r.msg_type = MSG_RESULT;
        hdr.p4r.next_block = hdr.p4r.next_block >> 8;
        SET_REPLY_FLAGS(extra_flags)
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
    }
    action make_status() {
        meta.to_worker = 1;
        hdr.p4r.protocol = PROTOCOL_VERSION;
        hdr.p4r.msg_type = MSG_STATUS;
        SET_REPLY_FLAGS(0)
        hdr.p4r.next_block = hdr.p4r.next_block >> 8;      /* NextBlock's key: back to the block */
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        hdr.values_0.setInvalid();
        hdr.values_1.setInvalid();
        hdr.fingerprint.setInvalid();
        hdr.round_status.setValid();
        hdr.round_status.contributors = meta.bitmap_before;  /* a duplicate: its bit is set */
    }
    action make_state_lost() {
        meta.to_worker = 1;
        hdr.p4r.protocol = PROTOCOL_VERSION;
        hdr.p4r.msg_type = MSG_RESULT;
        SET_REPLY_FLAGS(FLAG_STATE_LOST)
        hdr.p4r.next_block = hdr.p4r.next_block >> 8;      /* NextBlock's key: back to the block */
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        hdr.values_0.setInvalid();
        hdr.values_1.setInvalid();
        hdr.fingerprint.setInvalid();
    }
    action reply_to_sender() {
        meta.multicast = 0;
        meta.dest_rank = hdr.p4r.rank;
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }
    /* the bridge header carries what the harvest pass needs (bridge_to_egress) */
    action send_to_harvest() {
        hdr.bridge.harvest = 1;
        ig_tm_md.ucast_egress_port = HARVEST_PORT;
#if P4REDUCE_LANE_PASS
        hdr.bridge.deliver = 1;         /* the lane pass first, then the harvest pass */
#else
        hdr.bridge.lane_op = LANE_OP_READ_LOW;
#endif
    }
    /* a RESULT without values (an announce round's) takes the read-out pass alone: it
     * stores the round's winner (round_winner.p4), then is multicast or unicast */
    action multicast_result() {
        ig_tm_md.mcast_grp_a = meta.mcast_grp;
    }
    action send_to_read_out() {
        hdr.bridge.harvest = 1;
        ig_tm_md.ucast_egress_port = HARVEST_PORT;
        hdr.bridge.deliver = 0;
        hdr.bridge.lane_op = LANE_OP_READ_OUT;
    }
    /* LANE_PASS: a contribution that does not complete its round takes the lane pass
     * (its values are added there) and ends */
    action send_to_lane_pass() {
        hdr.bridge.harvest = 1;
        hdr.udp.length = TNA_UDP_LEN_WITH_VALUES;   /* a SKIP's zero lanes: parsed on the lane pass */
        ig_tm_md.ucast_egress_port = HARVEST_PORT;
        hdr.bridge.deliver = 0;
    }
    /* what v1model's egress writes on each copy; equal on all copies, so written once here */
    action from_switch() {
        hdr.ethernet.src_addr = meta.switch_mac;
        hdr.ipv4.src_addr = meta.switch_ip;
    }
    action set_lengths(bit<16> udp_len) {
        hdr.udp.length = udp_len;
        hdr.ipv4.total_len = udp_len + 20;
    }
    action status_to_sender() {
        make_status();
        reply_to_sender();
        from_switch();
        set_lengths(UDP_LEN_WITH_STATUS);
    }
#if P4REDUCE_LEAF_ROLE
    /* a leaf's STATUS goes to every one of its ranks (../v1model/result.p4: the ones
     * that contributed stop asking, one the bitmap lacks sends again at once) */
    action status_to_ranks() {
        make_status();
        meta.multicast = 1;
        ig_tm_md.mcast_grp_a = meta.mcast_grp;
        from_switch();
        set_lengths(UDP_LEN_WITH_STATUS);
    }
    /* which of the two answers a duplicate of an incomplete round gets: one table, not an
     * if-else (Result's branches sit after the pairs; a gateway there took a stage) */
    table status_reply {
        key = { meta.has_uplink: exact @name("has_uplink"); }
        actions = { status_to_sender; status_to_ranks; }
        const entries = {
            0: status_to_sender();
            1: status_to_ranks();
        }
        size = 2;
    }
#endif
#if P4REDUCE_LEAF_ROLE
    /* the spine's RESULT that the round stored (uplink.p4): to the ranks through the
     * read-out pass, as the round's own RESULT goes (its flags the spine's) */
    action pass_down() {
        meta.to_worker = 1;
        meta.multicast = 1;
        hdr.p4r.next_block = hdr.p4r.next_block >> 8;     /* NextBlock's key: back to the block */
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
    }
    /* the spine's STATE_LOST, or its STATUS (RELAYED: the round is complete here and
     * waits for the spine, whose bitmap counts the job's leaves), goes to the ranks at
     * once: it stores nothing */
    action down_at_once(flags_t relayed) {
        meta.to_worker = 1;
        meta.multicast = 1;
        hdr.p4r.next_block = hdr.p4r.next_block >> 8;
        hdr.p4r.flags = hdr.p4r.flags | relayed;
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        ig_tm_md.mcast_grp_a = meta.mcast_grp;
        from_switch();
    }
    /* A leaf's packet on a slot it lost (it restarted) goes up flagged STATE_LOST, as the
     * leaf's contribution (its rank, the uplink's addresses, FLAG_CONTINUED as it came),
     * instead of back to the rank alone: the spine marks the slot lost and tells every
     * leaf, whose ranks all fail at once (v1model: Result.make_partial(FLAG_STATE_LOST)).
     * Its content is the packet's (DATA: a SKIP carries its zero lanes on TNA); the spine
     * reads only the flag. The first pass holds the uplink's port and IPv4 as their xor
     * with the packet's (FromUplink): xored again here. */
    action lost_up(msg_type_t msg_type, flags_t flags, bit<16> udp_len) {
        hdr.p4r.protocol = PROTOCOL_VERSION;
        hdr.p4r.msg_type = msg_type;
        hdr.p4r.flags = flags;
        hdr.p4r.rank = meta.uplink_rank;
        hdr.p4r.next_block = hdr.p4r.next_block >> 8;      /* NextBlock's key: back to the block */
        hdr.ethernet.dst_addr = meta.uplink_mac;
        hdr.ipv4.dst_addr = meta.uplink_ip ^ hdr.ipv4.src_addr;
        hdr.udp.src_port = P4REDUCE_UDP_BASE;
        hdr.udp.dst_port = P4REDUCE_UDP_BASE;
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        ig_tm_md.ucast_egress_port = meta.uplink_port ^ ig_intr_md.ingress_port;
        from_switch();
        set_lengths(udp_len);
    }
#define LOST_UP_KEY meta.has_uplink: ternary @name("has_uplink");                 \
                    hdr.fingerprint.isValid(): ternary @name("announce");       \
                    hdr.p4r.flags[3:3]: ternary @name("continued");
#define LOST_UP(h, a, c) h, a, c,
#define LOST_UP_ACTION lost_up;
#define LOST_UP_ENTRIES                                                        \
    (1, true, 0, _): lost_up(MSG_ANNOUNCE, FLAG_STATE_LOST, UDP_LEN_WITH_FINGERPRINT); \
    (1, true, 1, _): lost_up(MSG_ANNOUNCE, FLAG_STATE_LOST | FLAG_CONTINUED,   \
                             UDP_LEN_WITH_FINGERPRINT);                        \
    (1, false, 0, _): lost_up(MSG_DATA, FLAG_STATE_LOST, TNA_UDP_LEN_WITH_VALUES); \
    (1, false, 1, _): lost_up(MSG_DATA, FLAG_STATE_LOST | FLAG_CONTINUED,      \
                              TNA_UDP_LEN_WITH_VALUES);
#else
#define LOST_UP_KEY
#define LOST_UP(h, a, c)
#define LOST_UP_ACTION
#define LOST_UP_ENTRIES
#endif
    /* a packet on a slot that lost the job's state gets STATE_LOST back; one flagged
     * STATE_LOST (a restarted leaf's, which marked the slot lost: ContributorBitmap) makes
     * every leaf of the job hear it (v1model's Result does the same) */
    action lost_to_sender() {
        make_state_lost();
        reply_to_sender();
        from_switch();
        set_lengths(UDP_LEN_HEADER_ONLY);
    }
    action lost_to_job() {
        make_state_lost();
        meta.multicast = 1;
        multicast_result();
        from_switch();
        set_lengths(UDP_LEN_HEADER_ONLY);
    }
    /* the answer per case as a const table, not ifs (one table in Result's chain) */
    table lost_reply {
        key = { LOST_UP_KEY hdr.p4r.flags[4:4]: ternary @name("state_lost"); }
        actions = { lost_to_sender; lost_to_job; LOST_UP_ACTION }
        const entries = {
            LOST_UP_ENTRIES
            (LOST_UP(_, _, _) 1): lost_to_job();
            (LOST_UP(_, _, _) _): lost_to_sender();
        }
        size = 6;
    }

    /* A RESULT's way out, chosen once after Result's branches (send_result): through the
     * read-out pass (round_winner.p4), which stores the round's winner and then multicasts
     * or unicasts it (p4reduce.p4) -- no group here, or the TM would send copies before
     * the winner is stored (and, with values, without the low lanes); with values, that
     * pass is the harvest pass. One const table rather than the same ifs in each branch:
     * on Tofino 1 every action under an if is a logical table of its own, and Result's
     * branches filled the stages after the pairs (docs/tofino.md, "Fit"). */
    bit<1> send_result;
    action send_values() {
        from_switch();
        set_lengths(TNA_UDP_LEN_WITH_VALUES);
        send_to_harvest();
    }
    action send_fingerprint() {
        from_switch();
        set_lengths(UDP_LEN_WITH_FINGERPRINT);
        send_to_read_out();
    }
    action send_header_only() {
        from_switch();
        set_lengths(UDP_LEN_HEADER_ONLY);
        send_to_read_out();
    }
#if !P4REDUCE_WINNER_CHECK
    /* no winner check (Tofino 1's test build): a RESULT without an extension leaves at
     * once, to the job's group or back to its sender (reply_to_sender chose the port) */
    action header_only_now() {
        from_switch();
        set_lengths(UDP_LEN_HEADER_ONLY);
    }
    action header_only_to_group() {
        header_only_now();
        multicast_result();
    }
#define HEADER_ONLY_ACTIONS header_only_now; header_only_to_group;
#define HEADER_ONLY_ENTRIES (false, false, 1): header_only_to_group();         \
                            (false, false, 0): header_only_now();
#else
#define HEADER_ONLY_ACTIONS
#define HEADER_ONLY_ENTRIES (false, false, _): send_header_only();
#endif
    table result_way {
        key = { hdr.values_0.isValid(): ternary @name("values");
                hdr.fingerprint.isValid(): ternary @name("announce");
                meta.multicast: ternary @name("multicast"); }
        actions = { send_values; send_fingerprint; send_header_only; HEADER_ONLY_ACTIONS }
        const entries = {
            (true, _, _): send_values();
            (false, true, _): send_fingerprint();
            HEADER_ONLY_ENTRIES
        }
        size = 4;
    }
    /* the completing packet: the RESULT to the job's group, or on a leaf up (uplink.p4) */
    action completed_result() {
        make_result(0);
        meta.multicast = 1;
#if P4REDUCE_LEAF_ROLE
        hdr.bridge.up = meta.has_uplink;
#endif
        send_result = 1;
    }
    /* a retransmission to a complete round: the cached RESULT back to its sender, or on a
     * leaf whose round waits for the spine the partial up again (up_if_cached: in_round) */
    action cached_result() {
        make_result(FLAG_CACHED);
        reply_to_sender();
#if P4REDUCE_LEAF_ROLE
        hdr.bridge.up = meta.up_if_cached;
#endif
        send_result = 1;
    }
    /* Each branch writes its whole reply (no flag read a stage later): the round is
     * complete when this packet completed it (a new contributor that found every other
     * rank's bit) or found it completed (a duplicate: a cached RESULT). */
    apply {
        bit<8> job = meta.job_index;   /* per-job counters are indexed by 8 bits: no 32-bit copy */
        send_result = 0;
#if P4REDUCE_LEAF_ROLE
        if (meta.downlink == 1) {
            /* from the spine (p4reduce.p4 dropped one from anywhere else): a RESULT the
             * round stored, STATE_LOST, or a STATUS (flagged RELAYED) goes to the ranks; a
             * RESULT the round already holds ends here */
            if (meta.lane_op == LANE_OP_STORE && meta.bitmap_before == ROUND_COMPLETE) {
                invert_exponent();
                pass_down();
                send_result = 1;
            } else if (hdr.p4r.msg_type == MSG_RESULT && hdr.p4r.flags[4:4] == 1) {
                down_at_once(0);
            } else if (hdr.p4r.msg_type == MSG_STATUS) {
                down_at_once(FLAG_RELAYED);
            } else {
                duplicates.count(job);
                ig_dprsr_md.drop_ctl = 1;
            }
        } else
#endif
        if (meta.state_lost == 1) {
            state_lost.count(job);
            lost_reply.apply();
        } else if (meta.stale == 1) {
            stale.count(job);
            ig_dprsr_md.drop_ctl = 1;
        } else if (meta.complete_diff == 0) {          /* this packet completes the round */
            invert_exponent();
            aggregated.count(job);
            rounds_completed.count(job);
            completed_result();
        } else if (meta.bitmap_before == ROUND_COMPLETE) {     /* a cached RESULT */
            invert_exponent();
            retransmissions_served.count(job);
            cached_result();
        } else if (meta.duplicate == 1) {
            duplicates.count(job);
#if P4REDUCE_LEAF_ROLE
            status_reply.apply();
#else
            status_to_sender();
#endif
        } else {
            aggregated.count(job);
#if P4REDUCE_LANE_PASS
            /* a DATA adds its lanes; a SKIP only matters as the round's first contributor
             * (it stores zeros): a later SKIP would add zeros, so it ends here */
            if (hdr.p4r.msg_type == MSG_DATA) {
                send_to_lane_pass();
            } else if (hdr.p4r.msg_type == MSG_SKIP && meta.first == 1) {
                send_to_lane_pass();
            } else {
                ig_dprsr_md.drop_ctl = 1;
            }
#else
            ig_dprsr_md.drop_ctl = 1;
#endif
        }
        if (send_result == 1) {
            result_way.apply();
        }
    }
}
#endif
