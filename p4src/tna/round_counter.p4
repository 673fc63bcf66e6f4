/* Round counter on TNA (../v1model/round_counter.p4 explains it); the stateful step is the
 * shared body of ../common/bodies/round_counter.p4. */
#ifndef P4REDUCE_TNA_ROUND_COUNTER_P4
#define P4REDUCE_TNA_ROUND_COUNTER_P4

control RoundCounter(inout headers_t hdr, inout metadata_t meta) {
    /* 32-bit cells (the v1model program's are 8-bit): an 8-bit stateful ALU reads only
     * 8-bit fields, and this one reads meta.seen (32 bits), the bitmap's verdict */
    Register<bit<32>, bit<16>>(SLOT_ENTRIES, 0) round_count;
    REGISTER_ACTION(bit<32>, bit<16>, round_count, count_step, ROUND_COUNT_BODY(meta.seen == 0))
    /* complete (a new contributor made the count) and round_done (a duplicate found it
     * made) are read where they are needed (result.p4, next_block.p4) as
     * round_count == worker_count: one stage earlier than flags computed from it */
    apply {
        meta.round_count = count_step.execute(meta.slot_index_16)[7:0];
    }
}
#endif
