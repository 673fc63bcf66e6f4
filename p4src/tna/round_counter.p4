/* Round counter on TNA (../v1model/round_counter.p4 explains it); the stateful step is the
 * shared body of ../common/bodies/round_counter.p4. */
#ifndef P4REDUCE_TNA_ROUND_COUNTER_P4
#define P4REDUCE_TNA_ROUND_COUNTER_P4

control RoundCounter(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<8>, bit<16>>(SLOT_ENTRIES, 0) round_count;
    REGISTER_ACTION(bit<8>, bit<16>, round_count, count_step, ROUND_COUNT_BODY)
    bit<8> count;

    apply {
        count = count_step.execute(meta.slot_index_16);
        meta.complete = 0;
        meta.round_done = 0;
        if (count == meta.worker_count) {
            if (meta.duplicate == 0) {
                meta.complete = 1;
            } else {
                meta.round_done = 1;
            }
        }
    }
}
#endif
