/* Round counter (docs/protocol.md section 9), v1model: how many ranks have contributed to
 * the slot's current round in this version. The bitmap says whether one rank has; the
 * count says when all have. On a Tofino-class target a register action returns a single
 * value, so both are needed there; the same layout here keeps the mapping one-to-one.
 * The stateful step is the shared body of common/bodies/round_counter.p4. */
#ifndef P4REDUCE_ROUND_COUNTER_P4
#define P4REDUCE_ROUND_COUNTER_P4
#include "../common/headers.p4"
#include "../common/bodies/round_counter.p4"
#include "register_step.p4"

control RoundCounter(inout headers_t hdr, inout metadata_t meta) {
    register<bit<8>>(SLOT_ENTRIES) round_count;

    action count_contributor() {
        bit<8> count;
        REGISTER_STEP(round_count, meta.slot_index, bit<8>, count, ROUND_COUNT_BODY(meta.duplicate == 0))
        meta.complete = (meta.duplicate == 0 && count == meta.worker_count) ? 1w1 : 1w0;
        meta.round_done = (meta.duplicate == 1 && count == meta.worker_count) ? 1w1 : 1w0;
    }

    apply {
        count_contributor();
    }
}
#endif
