/* Value aggregation (docs/protocol.md section 10), v1model: one register array per lane
 * (LANES of them), one cell per (slot, version). The first contributor of a round
 * overwrites its version's cells (a SKIP writes zeros), later contributors add; the packet
 * then carries the running sums, so the packet that completes the round carries the result.
 * A SKIP (header only) that completes a round, and a retransmission of a completed round,
 * get the values read back into a new values header. The stateful steps are the shared
 * bodies of common/bodies/value_aggregation.p4.
 *
 * int32 overflow is detected, not saturated: a lane's partial sum overflowed when both
 * operands have the same sign and the sum's sign differs. The per-round overflow bit is
 * sticky and travels in the result (FLAG_OVERFLOW); workers raise instead of returning a
 * wrong sum. Quantized floats cannot overflow by construction (docs/protocol.md). The check
 * needs each lane's stored value and sum, which v1model has in the action; it runs outside
 * the shared body.
 *
 * Packed-encoding jobs (quantized floats): each lane arrives as q + bias with
 * 0 <= q + bias <= 2 * bias and bias = floor(M/N), so no lane's N-way sum reaches 2^32 and
 * the whole block is added as one bit<2048> word -- one register read-add-write per
 * packet instead of 64, and no overflow check (none can happen). A SKIP adds the bias in
 * every lane (the rank's q is 0 there), so every round's sum is sum(q) + N * bias and the
 * workers remove N * bias without knowing who sent DATA. Same body, LANE_ADD_BODY. */
#ifndef P4REDUCE_VALUE_AGGREGATION_P4
#define P4REDUCE_VALUE_AGGREGATION_P4
#include "../common/headers.p4"
#include "../common/bodies/value_aggregation.p4"
#include "../common/bodies/read.p4"
#include "register_step.p4"

/* 0x00000001 in each of the 64 lanes: bias * PACKED_LANE_ONES puts bias in every lane. */
const bit<2048> PACKED_LANE_ONES = 2048w0x00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001_00000001;

control ValueAggregation(inout headers_t hdr, inout metadata_t meta) {
#define LANE_REGISTER(i) register<bit<32>>(SLOT_ENTRIES) lane_##i;
    FOR_EACH_LANE(LANE_REGISTER)
    register<bit<1>>(SLOT_ENTRIES) round_overflow;
    register<bit<2048>>(SLOT_ENTRIES) packed_sums;

    bit<32> overflow_bits;

    action add_values() {
        overflow_bits = 0;
#define LANE_ADD(i)                                                            \
        REGISTER_STEP_THEN(lane_##i, meta.slot_index, bit<32>, hdr.values.v##i,\
            LANE_ADD_BODY(hdr.values.v##i),                                    \
            overflow_bits = overflow_bits                                      \
                | ((value ^ stored) & (value ^ hdr.values.v##i));)
        FOR_EACH_LANE(LANE_ADD)
        meta.lane_overflow = overflow_bits[31:31];
    }
    action store_first_skip() {
        hdr.values.setValid();
#define LANE_ZERO(i)                                                           \
        REGISTER_STEP(lane_##i, meta.slot_index, bit<32>, hdr.values.v##i,     \
                      LANE_ADD_BODY(32w0))
        FOR_EACH_LANE(LANE_ZERO)
        meta.lane_overflow = 0;
    }
    action read_values() {
        hdr.values.setValid();
#define LANE_READ(i)                                                           \
        REGISTER_STEP(lane_##i, meta.slot_index, bit<32>, hdr.values.v##i, READ_BODY)
        FOR_EACH_LANE(LANE_READ)
        meta.lane_overflow = 0;
    }
    action no_values() {
        meta.lane_overflow = 0;
    }

    action add_packed() {
        REGISTER_STEP(packed_sums, meta.slot_index, bit<2048>, hdr.packed_values.word,
                      LANE_ADD_BODY(hdr.packed_values.word))
        meta.round_overflow = 0;
    }
    action add_packed_skip() {
        hdr.packed_values.setValid();
        hdr.packed_values.word = ((bit<2048>)meta.bias) * PACKED_LANE_ONES;
        add_packed();
    }
    action read_packed() {
        hdr.packed_values.setValid();
        REGISTER_STEP(packed_sums, meta.slot_index, bit<2048>, hdr.packed_values.word,
                      READ_BODY)
        meta.round_overflow = 0;
    }

    action accumulate_overflow() {
        REGISTER_STEP(round_overflow, meta.slot_index, bit<1>, meta.round_overflow,
                      ROUND_OVERFLOW_BODY)
    }
    action read_overflow() {
        REGISTER_STEP(round_overflow, meta.slot_index, bit<1>, meta.round_overflow, READ_BODY)
    }

    apply {
        if (meta.encoding == ENCODING_PACKED) {
            if (meta.duplicate == 1) {
                /* only reached when the round is complete: serve the stored result */
                if (hdr.p4r.msg_type != MSG_ANNOUNCE) {
                    read_packed();
                } else {
                    meta.round_overflow = 0;
                }
            } else if (hdr.p4r.msg_type == MSG_DATA) {
                add_packed();
            } else if (hdr.p4r.msg_type == MSG_SKIP) {
                add_packed_skip();
            } else {
                meta.round_overflow = 0;
            }
        } else if (meta.duplicate == 1) {
            /* only reached when the round is complete: serve the stored result */
            if (hdr.p4r.msg_type != MSG_ANNOUNCE) {
                read_values();
            }
            read_overflow();
        } else {
            if (hdr.p4r.msg_type == MSG_DATA) {
                add_values();
            } else if (hdr.p4r.msg_type == MSG_SKIP) {
                if (meta.first == 1) {
                    store_first_skip();
                } else if (meta.complete == 1) {
                    read_values();
                } else {
                    no_values();
                }
            } else {
                no_values();
            }
            accumulate_overflow();
        }
    }
}
#endif
