/* Round counter: how many ranks have contributed to the slot's current round in this
 * version. The bitmap says whether one rank has; the count says when all have. On a
 * Tofino-class target a register action returns a single value, so both are needed there;
 * the same layout here keeps the mapping one-to-one. The first contributor restarts it. */
#ifndef P4REDUCE_ROUND_COUNTER_P4
#define P4REDUCE_ROUND_COUNTER_P4
#include "headers.p4"

control RoundCounter(inout headers_t hdr, inout metadata_t meta) {
    register<bit<8>>(SLOT_ENTRIES) round_count;

    action count_contributor() {
        bit<8> count;
        round_count.read(count, meta.slot_index);
        count = (meta.first == 1) ? 8w1 : count + 1;
        round_count.write(meta.slot_index, count);
        meta.complete = (count == meta.worker_count) ? 1w1 : 1w0;
        meta.round_done = 0;
    }
    action check_round_done() {
        bit<8> count;
        round_count.read(count, meta.slot_index);
        meta.complete = 0;
        meta.round_done = (count == meta.worker_count) ? 1w1 : 1w0;
    }

    apply {
        if (meta.duplicate == 0) {
            count_contributor();
        } else {
            check_round_done();
        }
    }
}
#endif
