/* Next block on TNA (../v1model/next_block.p4 explains it); the stateful steps are the
 * shared bodies of ../common/bodies/. The key (next_block[23:0] ++ ~next_exponent) is built
 * in the packet's next_block field and the round's minimum comes back into it: a packet
 * that runs NextBlock is dropped (an incomplete round), or becomes a RESULT, whose
 * make_result (result.p4) turns the key back into next_block and next_exponent, or a STATUS,
 * whose make_status shifts its own key back (next_block[31:24] is 0 by validation). So no
 * PHV holds the key twice. The read of a completed round's key (a retransmission) waits
 * for the bitmap; nothing else does. */
#ifndef P4REDUCE_TNA_NEXT_BLOCK_P4
#define P4REDUCE_TNA_NEXT_BLOCK_P4

control NextBlock(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<32>, bit<16>>(SLOT_ENTRIES, 0) next_key;
    REGISTER_ACTION(bit<32>, bit<16>, next_key, minimum_step, NEXT_KEY_BODY(hdr.p4r.next_block))
    REGISTER_ACTION(bit<32>, bit<16>, next_key, read_step, READ_BODY)

    action make_key() {
        hdr.p4r.next_block = hdr.p4r.next_block[23:0] ++ (~hdr.p4r.next_exponent);
    }

    apply {
        make_key();
        if (meta.seen == 0) {
#if P4REDUCE_WINNER_CHECK
            if (meta.in_round == 1) {                           /* not stale */
#endif
                hdr.p4r.next_block = minimum_step.execute(meta.slot_index_16);
#if P4REDUCE_WINNER_CHECK
            }
#endif
        } else if (meta.bitmap_before == ROUND_COMPLETE) {      /* the round is done */
            hdr.p4r.next_block = read_step.execute(meta.slot_index_16);
        }
    }
}
#endif
