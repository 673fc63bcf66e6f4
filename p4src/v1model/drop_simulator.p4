/* Drop simulator: loses a configured fraction of a job's p4reduce packets on the way in
 * (ingress) and on the way out (egress, per result copy), because this kernel has no netem.
 * The roll is crc32 of the seed and the job's packet sequence number -- the same packet
 * sequence loses the same packets on every target -- or the target's random number
 * generator. The sequence number is taken once, in ingress; a result copy's egress roll
 * hashes it with the copy's rank, so which copies are lost does not depend on the order in
 * which a target's egress threads handle them. Thresholds are fractions of 65536; 0
 * disables a direction. */
#ifndef P4REDUCE_DROP_SIMULATOR_P4
#define P4REDUCE_DROP_SIMULATOR_P4
#include "../common/headers.p4"
#include "../common/bodies/drop_simulator.p4"
#include "register_step.p4"

control DropSimulator(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    register<bit<32>>(MAX_JOBS) ingress_sequence;
    counter(MAX_JOBS, CounterType.packets) simulated_drops_ingress;

    action simulate_loss(bit<16> ingress_threshold, bit<16> egress_threshold,
                         bit<32> seed, bit<1> use_random) {
        meta.sim_egress_threshold = egress_threshold;
        meta.sim_seed = seed;
        meta.sim_random = use_random;
        REGISTER_STEP(ingress_sequence, (bit<32>)meta.job_index, bit<32>, meta.sim_sequence,
                      SEQUENCE_BODY)
        bit<32> sequence = meta.sim_sequence;
        bit<16> hashed;
        hash(hashed, HashAlgorithm.crc32, 16w0, { seed, sequence }, 32w65536);
        bit<16> rolled;
        random(rolled, 16w0, 16w0xFFFF);
        bit<16> roll = (use_random == 1) ? rolled : hashed;
        meta.sim_drop = (roll < ingress_threshold) ? 1w1 : 1w0;
    }
    action no_loss() {
        meta.sim_drop = 0;
        meta.sim_egress_threshold = 0;
    }
    table drop_simulator {
        key = { hdr.p4r.job: exact @name("job"); }
        actions = { simulate_loss; no_loss; }
        default_action = no_loss();
        size = MAX_JOBS;
    }

    apply {
        drop_simulator.apply();
        if (meta.sim_drop == 1) {
            simulated_drops_ingress.count((bit<32>)meta.job_index);
        }
    }
}

control DropSimulatorEgress(inout headers_t hdr, inout metadata_t meta,
                            inout standard_metadata_t standard_metadata) {
    counter(MAX_JOBS, CounterType.packets) simulated_drops_egress;

    action roll_egress() {
        bit<16> hashed;
        hash(hashed, HashAlgorithm.crc32, 16w0,
             { ~meta.sim_seed, meta.sim_sequence, meta.dest_rank }, 32w65536);
        bit<16> rolled;
        random(rolled, 16w0, 16w0xFFFF);
        bit<16> roll = (meta.sim_random == 1) ? rolled : hashed;
        meta.sim_drop = (roll < meta.sim_egress_threshold) ? 1w1 : 1w0;
    }

    apply {
        if (meta.sim_egress_threshold != 0) {
            roll_egress();
            if (meta.sim_drop == 1) {
                simulated_drops_egress.count((bit<32>)meta.job_index);
                mark_to_drop(standard_metadata);
            }
        }
    }
}
#endif
