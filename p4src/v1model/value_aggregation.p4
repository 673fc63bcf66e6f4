/* Value aggregation (docs/protocol.md section 10), v1model: one register array per pair of
 * lanes (32 of them), one pair_t cell per (slot, version). The first contributor of a round
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
 * the shared body. */
#ifndef P4REDUCE_VALUE_AGGREGATION_P4
#define P4REDUCE_VALUE_AGGREGATION_P4
#include "../common/headers.p4"
#include "../common/bodies/value_aggregation.p4"
#include "../common/bodies/read.p4"
#include "register_step.p4"

control ValueAggregation(inout headers_t hdr, inout metadata_t meta) {
#define LANE_PAIR_REGISTER(p, l, h) register<bit<64>>(SLOT_ENTRIES) lanes_##p;
    FOR_EACH_LANE_PAIR(LANE_PAIR_REGISTER)
    register<bit<1>>(SLOT_ENTRIES) round_overflow;

    bit<32> overflow_bits;

    action add_values() {
        overflow_bits = 0;
#define LANE_PAIR_ADD(p, l, h)                                                 \
        PAIR_STEP(lanes_##p, meta.slot_index, hdr.values.v##h,                 \
                  LANE_PAIR_ADD_BODY(hdr.values.v##l, hdr.values.v##h),        \
                  overflow_bits = overflow_bits                                \
                      | ((value.lo ^ stored.lo) & (value.lo ^ hdr.values.v##l)) \
                      | ((value.hi ^ stored.hi) & (value.hi ^ hdr.values.v##h)); \
                  hdr.values.v##l = value.lo;)
        FOR_EACH_LANE_PAIR(LANE_PAIR_ADD)
        meta.lane_overflow = overflow_bits[31:31];
    }
    action store_first_skip() {
        hdr.values.setValid();
#define LANE_ZERO(i) hdr.values.v##i = 0;
        FOR_EACH_LANE(LANE_ZERO)
        add_values();
    }
    action read_values() {
        hdr.values.setValid();
#define LANE_PAIR_READ(p, l, h)                                                \
        PAIR_STEP(lanes_##p, meta.slot_index, hdr.values.v##h, LANE_PAIR_READ_BODY, \
                  hdr.values.v##l = value.lo;)
        FOR_EACH_LANE_PAIR(LANE_PAIR_READ)
        meta.lane_overflow = 0;
    }
    action no_values() {
        meta.lane_overflow = 0;
    }

    action accumulate_overflow() {
        REGISTER_STEP(round_overflow, meta.slot_index, bit<1>, meta.round_overflow,
                      ROUND_OVERFLOW_BODY)
    }
    action read_overflow() {
        REGISTER_STEP(round_overflow, meta.slot_index, bit<1>, meta.round_overflow, READ_BODY)
    }

    apply {
        if (meta.duplicate == 1) {
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
