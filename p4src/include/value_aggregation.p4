/* Value aggregation: one register array per lane (LANES of them), indexed by slot_index.
 * The first contributor of a round overwrites the version's values (a skip writes zeros),
 * later contributors add; the packet then carries the running sum, so the packet that
 * completes the round carries the result. A skip (header only) that completes a round, and
 * a retransmission of a completed round, get the values read back into a new values header.
 *
 * int32 overflow is detected, not saturated: a lane's partial sum overflowed when both
 * operands have the same sign and the sum's sign differs. The per-round overflow bit is
 * sticky and travels in the result (FLAG_OVERFLOW); workers raise instead of returning a
 * wrong sum. Quantized floats cannot overflow by construction (docs/protocol.md). */
#ifndef P4REDUCE_VALUE_AGGREGATION_P4
#define P4REDUCE_VALUE_AGGREGATION_P4
#include "headers.p4"

control ValueAggregation(inout headers_t hdr, inout metadata_t meta) {
#define LANE_REGISTER(i) register<bit<32>>(SLOT_ENTRIES) lane_##i;
    FOR_EACH_LANE(LANE_REGISTER)
    register<bit<1>>(SLOT_ENTRIES) round_overflow;

    bit<32> stored;
    bit<32> sum;

    action store_first_data() {
#define LANE_STORE(i) lane_##i.write(meta.slot_index, hdr.values.v##i);
        FOR_EACH_LANE(LANE_STORE)
        meta.lane_overflow = 0;
    }
    action store_first_skip() {
        hdr.values.setValid();
#define LANE_ZERO(i) lane_##i.write(meta.slot_index, 32w0); hdr.values.v##i = 0;
        FOR_EACH_LANE(LANE_ZERO)
        meta.lane_overflow = 0;
    }
    action add_data() {
        meta.lane_overflow = 0;
#define LANE_ADD(i) \
        lane_##i.read(stored, meta.slot_index); \
        sum = stored + hdr.values.v##i; \
        meta.lane_overflow = meta.lane_overflow | ((sum ^ stored) & (sum ^ hdr.values.v##i)); \
        lane_##i.write(meta.slot_index, sum); \
        hdr.values.v##i = sum;
        FOR_EACH_LANE(LANE_ADD)
    }
    action read_values() {
        hdr.values.setValid();
#define LANE_READ(i) lane_##i.read(hdr.values.v##i, meta.slot_index);
        FOR_EACH_LANE(LANE_READ)
        meta.lane_overflow = 0;
    }
    action no_values() {
        meta.lane_overflow = 0;
    }

    action accumulate_overflow() {
        bit<1> sticky;
        round_overflow.read(sticky, meta.slot_index);
        sticky = (meta.first == 1) ? meta.lane_overflow[31:31]
                                   : (sticky | meta.lane_overflow[31:31]);
        round_overflow.write(meta.slot_index, sticky);
        meta.round_overflow = sticky;
    }
    action read_overflow() {
        round_overflow.read(meta.round_overflow, meta.slot_index);
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
                if (meta.first == 1) {
                    store_first_data();
                } else {
                    add_data();
                }
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
