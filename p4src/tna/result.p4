/* Result and replication on TNA (../v1model/result.p4 explains them; same counters). A
 * RESULT that carries values first takes the harvest pass (recirculation) for the low
 * lanes of its pairs; the harvest pass then multicasts it, or unicasts it to the port
 * the request came from. */
#ifndef P4REDUCE_TNA_RESULT_P4
#define P4REDUCE_TNA_RESULT_P4

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

    /* A Tofino ALU writes a container with one kind of instruction per action: the
     * inverted exponent is computed before make_result copies it. The header-writing
     * actions also rewrite `protocol` (already checked to be PROTOCOL_VERSION), so that
     * only slot_version stays unwritten in the first 16 bits (a write must leave one
     * contiguous part of a container alone). */
    bit<8> next_exponent;
    action invert_exponent() {
        next_exponent = ~meta.next_key[7:0];
    }
    action make_result(bit<7> extra_flags) {
        meta.to_worker = 1;
        hdr.p4r.protocol = PROTOCOL_VERSION;
        hdr.p4r.msg_type = MSG_RESULT;
        hdr.p4r.next_block = (bit<32>)meta.next_key[31:8];
        hdr.p4r.next_exponent = next_exponent;
        hdr.p4r.flags = extra_flags;
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
    }
    action make_status() {
        meta.to_worker = 1;
        hdr.p4r.protocol = PROTOCOL_VERSION;
        hdr.p4r.msg_type = MSG_STATUS;
        hdr.p4r.flags = 0;
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        hdr.values.setInvalid();
        hdr.fingerprint.setInvalid();
        hdr.round_status.setValid();
        hdr.round_status.contributors = meta.contributors;
    }
    action make_state_lost() {
        meta.to_worker = 1;
        hdr.p4r.protocol = PROTOCOL_VERSION;
        hdr.p4r.msg_type = MSG_RESULT;
        hdr.p4r.flags = FLAG_STATE_LOST;
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        hdr.values.setInvalid();
        hdr.fingerprint.setInvalid();
    }
    action reply_to_sender() {
        meta.multicast = 0;
        meta.dest_rank = hdr.p4r.rank;
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }
    /* validated here, filled by fill_harvest: see bridge_fields in p4reduce.p4 */
    action send_to_harvest() {
        hdr.harvest.setValid();
        ig_tm_md.ucast_egress_port = HARVEST_PORT;
    }
    action fill_harvest() {
        hdr.harvest.reply_port = ig_intr_md.ingress_port;
        hdr.harvest.mcast_grp = meta.mcast_grp;
        hdr.harvest.job_index = meta.job_index;
        hdr.harvest.pool_slot = meta.pool_slot;
        hdr.harvest.sim_egress_threshold = meta.sim_egress_threshold;
        hdr.harvest.sim_seed = meta.sim_seed;
        hdr.harvest.sim_sequence = meta.sim_sequence;
    }
    /* multicast and sim_random share a byte of harvest_t: see bridge_flags (p4reduce.p4) */
    action set_harvest_flags(bit<1> multicast, bit<1> sim_random) {
        hdr.harvest.multicast = multicast;
        hdr.harvest.sim_random = sim_random;
    }
    table harvest_flags {
        key = { meta.multicast: exact; meta.sim_random: exact; }
        actions = { set_harvest_flags; }
        const entries = {
            (0, 0): set_harvest_flags(0, 0); (0, 1): set_harvest_flags(0, 1);
            (1, 0): set_harvest_flags(1, 0); (1, 1): set_harvest_flags(1, 1);
        }
        size = 4;
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

    apply {
        bit<8> job = meta.job_index;   /* per-job counters are indexed by 8 bits: no 32-bit copy */
        invert_exponent();
        if (meta.state_lost == 1) {
            state_lost.count(job);
            make_state_lost();
            reply_to_sender();
        } else if (meta.complete == 1) {
            aggregated.count(job);
            rounds_completed.count(job);
            make_result(0);
            meta.multicast = 1;
            ig_tm_md.mcast_grp_a = meta.mcast_grp;
        } else if (meta.duplicate == 1 && meta.round_done == 1) {
            retransmissions_served.count(job);
            make_result(FLAG_CACHED);
            reply_to_sender();
        } else if (meta.duplicate == 1) {
            duplicates.count(job);
            make_status();
            reply_to_sender();
        } else {
            aggregated.count(job);
            ig_dprsr_md.drop_ctl = 1;
        }
        if (meta.to_worker == 1) {
            from_switch();
            if (hdr.values.isValid()) {
                set_lengths(UDP_LEN_WITH_VALUES);
                send_to_harvest();
                fill_harvest();
                harvest_flags.apply();
            } else if (hdr.fingerprint.isValid()) {
                set_lengths(UDP_LEN_WITH_FINGERPRINT);
            } else if (hdr.round_status.isValid()) {
                set_lengths(UDP_LEN_WITH_STATUS);
            } else {
                set_lengths(UDP_LEN_HEADER_ONLY);
            }
        }
    }
}
#endif
