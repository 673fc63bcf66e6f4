/* Next block on TNA (../v1model/next_block.p4 explains it); the stateful steps are the
 * shared bodies of ../common/bodies/. */
#ifndef P4REDUCE_TNA_NEXT_BLOCK_P4
#define P4REDUCE_TNA_NEXT_BLOCK_P4

control NextBlock(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<32>, bit<32>>(SLOT_ENTRIES, 0) next_key;
    REGISTER_ACTION(bit<32>, bit<32>, next_key, minimum_step, NEXT_KEY_BODY)
    REGISTER_ACTION(bit<32>, bit<32>, next_key, read_step, READ_BODY)

    apply {
        meta.announced_key = hdr.p4r.next_block[23:0] ++ (~hdr.p4r.next_exponent);
        if (meta.duplicate == 0) {
            meta.next_key = minimum_step.execute(meta.slot_index);
        } else {
            meta.next_key = read_step.execute(meta.slot_index);
        }
    }
}
#endif
