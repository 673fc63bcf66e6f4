/* Drop simulator on TNA (../v1model/drop_simulator.p4 explains it; same table and action).
 * crc32 through the Hash extern, the random roll through Random; the sequence step is the
 * shared body of ../common/bodies/drop_simulator.p4. */
#ifndef P4REDUCE_TNA_DROP_SIMULATOR_P4
#define P4REDUCE_TNA_DROP_SIMULATOR_P4
#if P4REDUCE_DROP_SIMULATOR

/* The table runs for every packet that is not a harvest pass (its entry only sets the
 * thresholds); the sequence step, the roll and the loss only for an admitted, well-formed
 * p4reduce packet addressed to the switch whose slot is in range, as on v1model. The
 * verdict is meta.sim_keep: roll |-| (threshold - 1), 0 exactly when roll < threshold
 * (the packet is lost); 1 when nothing is rolled. */
control DropSimulator(inout headers_t hdr, inout metadata_t meta, in bit<32> dst_diff) {
    Register<bit<32>, bit<32>>(MAX_JOBS, 0) ingress_sequence;
    REGISTER_ACTION(bit<32>, bit<32>, ingress_sequence, next_sequence, SEQUENCE_BODY)
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) simulated_drops_ingress;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) roll_hash;
    Random<bit<16>>() roll_random;
    bit<16> sim_ingress_threshold;
    bit<16> sim_ingress_last;       /* threshold - 1 */
    bit<1> simulating;
    /* A gateway cannot compare two fields (<): a saturating difference, computed with the
     * roll in one action. The roll (hash or random unit) is action data, which an ALU takes
     * as the first operand only: roll |-| (threshold - 1) is 0 exactly when
     * roll < threshold. */
    action roll_random_keep() {
        meta.sim_keep = roll_random.get() |-| sim_ingress_last;
    }
    action roll_hash_keep() {
        meta.sim_keep = roll_hash.get({ meta.sim_seed, meta.sim_sequence }) |-| sim_ingress_last;
    }
    /* the sequence step is taken where the packet is known to count (not in the table's
     * action, which runs for every packet) */
    action take_sequence() {
        meta.sim_sequence = next_sequence.execute((bit<32>)meta.job_index);
    }

    action simulate_loss(bit<16> ingress_threshold, bit<16> egress_threshold,
                         bit<32> seed, bit<1> use_random) {
        simulating = 1;
        sim_ingress_threshold = ingress_threshold;
        sim_ingress_last = ingress_threshold - 1;
        meta.sim_egress_threshold = egress_threshold;
        meta.sim_seed = seed;
        meta.sim_random = use_random;
    }
    action no_loss() {
        simulating = 0;
        sim_ingress_threshold = 0;
        meta.sim_egress_threshold = 0;
    }
    table drop_simulator {
        key = { hdr.p4r.job: exact @name("job"); }
        actions = { simulate_loss; no_loss; }
        default_action = no_loss();
        size = MAX_JOBS;
    }

    apply {
        meta.sim_keep = 1;
        drop_simulator.apply();
        if (hdr.p4r.isValid() && hdr.ipv4.isValid()) {
            if (dst_diff == 0) {
                if (meta.malformed == 0 && meta.admitted == 1 && meta.encoding_differs == 0) {
                    if (meta.slot_count != 0 && simulating == 1) {
                        take_sequence();
                        if (sim_ingress_threshold != 0) {
                            if (meta.sim_random == 1) {
                                roll_random_keep();
                            } else {
                                roll_hash_keep();
                            }
                            if (meta.sim_keep == 0) {
                                simulated_drops_ingress.count(meta.job_index);
                            }
                        }
                    }
                }
            }
        }
    }
}

control DropSimulatorEgress(inout headers_t hdr, in egress_intrinsic_metadata_t eg_intr_md,
                            inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) simulated_drops_egress;
    Hash<bit<16>>(HashAlgorithm_t.CRC32) roll_hash;
    Random<bit<16>>() roll_random;
    bit<16> roll;
    bit<16> below;
    action compare_roll() {
        below = hdr.bridge.sim_egress_threshold |-| roll;
    }

    apply {
        if (hdr.bridge.sim_egress_threshold != 0) {
            if (hdr.bridge.sim_random == 1) {
                roll = roll_random.get();
            } else {
                roll = roll_hash.get({ ~hdr.bridge.sim_seed, hdr.bridge.sim_sequence,
                                       hdr.bridge.dest_rank });
            }
            compare_roll();
            if (below != 0) {
                simulated_drops_egress.count(hdr.bridge.job_index);
                eg_dprsr_md.drop_ctl = 1;
            }
        }
    }
}
#else
/* The production build (bridge.p4): no table, no roll, no sequence step; the two counters
 * stay, never counted, so that every build has the per-job counters the controller reads
 * and zeroes (a job on a production build has no simulated drops: they read 0). The
 * drop_simulator table is absent from its P4Info: a loss cannot be configured there. */
control DropSimulator(inout headers_t hdr, inout metadata_t meta, in bit<32> dst_diff) {
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) simulated_drops_ingress;
    apply {
        meta.sim_random = 0;        /* bridge_flags reads it */
    }
}

control DropSimulatorEgress(inout headers_t hdr, in egress_intrinsic_metadata_t eg_intr_md,
                            inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) simulated_drops_egress;
    apply {
    }
}
#endif
#endif
