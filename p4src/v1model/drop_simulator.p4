/* Drop simulator: loses a configured fraction of a job's p4reduce packets on the way in
 * (ingress) and on the way out (egress, per result copy), because this kernel has no netem.
 * The roll is a hash of the seed and the job's packet sequence number -- the same packet
 * sequence loses the same packets on every target -- or the target's random number
 * generator. The sequence number is taken once, in ingress; a result copy's egress roll
 * hashes it with the copy's rank, so which copies are lost does not depend on the order in
 * which a target's egress threads handle them. Thresholds are fractions of 65536; 0
 * disables a direction.
 *
 * The hash is murmur3's finalizer (mix32), not crc32: crc32 is affine in its input's bits,
 * so the rolls of sequence numbers a few packets apart were correlated -- a packet lost
 * made the next packet, or one 16 later, lost with twice to three times the configured
 * chance -- and a rank resending at a steady rhythm met runs of loss that independent loss
 * would give once in millions of tries. mix32 flips about half its output's bits for any
 * change of its input, so every packet's roll is independent of its neighbours'. */
#ifndef P4REDUCE_DROP_SIMULATOR_P4
#define P4REDUCE_DROP_SIMULATOR_P4
#include "../common/headers.p4"
#include "../common/bodies/drop_simulator.p4"
#include "register_step.p4"

/* murmur3's 32-bit finalizer, in place on a metadata field (entered with its value read
 * once): a bijection whose every output bit depends on every input bit (multiplication
 * carries), unlike a CRC's. p4c substitutes a field's new expression into the action's
 * next statement that reads it, and each xorshift reads f twice: SETTLE (an identity
 * hash, one primitive) makes f a plain value again before the next one, where substituting
 * doubled the expression at every step (a quarter of a megabyte per action). */
#define SETTLE(f) hash(f, HashAlgorithm.identity, 32w0, { f }, 64w0x100000000);
#define MIX32(f)                                                               \
    f = (f ^ (f >> 16)) * 32w0x85EBCA6B;                                       \
    SETTLE(f)                                                                  \
    f = (f ^ (f >> 13)) * 32w0xC2B2AE35;                                       \
    SETTLE(f)                                                                  \
    f = f ^ (f >> 16);
/* seeds s and s + i number their packets i x 0x9E3779B9 apart (the golden ratio of 2^32):
 * no two seeds of a fabric (seed + switch) roll the same inputs in any practical run */
#define SEED_STRIDE 32w0x9E3779B9

control DropSimulator(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    register<bit<32>>(MAX_JOBS) ingress_sequence;
    counter(MAX_JOBS, CounterType.packets) simulated_drops_ingress;

    action simulate_loss(bit<16> ingress_threshold, bit<16> egress_threshold,
                         bit<32> seed, bit<1> use_random) {
        meta.sim_egress_threshold = egress_threshold;
        meta.sim_random = use_random;
        REGISTER_STEP(ingress_sequence, (bit<32>)meta.job_index, bit<32>, meta.sim_sequence,
                      SEQUENCE_BODY)
        /* the packet's key, mix32(sequence + seed x SEED_STRIDE): its low half is this
         * roll; each result copy mixes its rank into it (DropSimulatorEgress) */
        meta.sim_key = meta.sim_sequence + seed * SEED_STRIDE;
        SETTLE(meta.sim_key)
        MIX32(meta.sim_key)
        SETTLE(meta.sim_key)
        bit<16> hashed = meta.sim_key[15:0];
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
        /* this copy's roll: mix32(the packet's key ^ rank) */
        meta.sim_key = meta.sim_key ^ (bit<32>)meta.dest_rank;
        SETTLE(meta.sim_key)
        MIX32(meta.sim_key)
        bit<16> hashed = meta.sim_key[15:0];
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
