/* Next block on TNA (../v1model/next_block.p4 explains it); the stateful steps are the
 * shared body of ../common/bodies/next_block.p4, one per case (the first contributor
 * overwrites, a later one keeps the minimum, a duplicate of a complete round reads), chosen
 * by a table from the bitmap's answer in the stage after it (as the lane pairs':
 * value_aggregation.p4). The key (next_block[23:0] ++ ~next_exponent) is built in the
 * packet's next_block field and the round's minimum comes back into it: a packet that runs
 * NextBlock is dropped (an incomplete round), or becomes a RESULT, whose make_result
 * (result.p4) turns the key back into next_block and next_exponent, or a STATUS or a
 * STATE_LOST RESULT, whose make_status / make_state_lost shift their own key back
 * (next_block[31:24] is 0 by validation). So no PHV holds the key twice. */
#ifndef P4REDUCE_TNA_NEXT_BLOCK_P4
#define P4REDUCE_TNA_NEXT_BLOCK_P4

/* The key, built where a contribution's steps are decided (p4reduce.p4, phase A). */
control NextBlock(inout headers_t hdr, inout metadata_t meta) {
    action make_key() {
        hdr.p4r.next_block = hdr.p4r.next_block[23:0] ++ (~hdr.p4r.next_exponent);
    }
    apply {
        make_key();
    }
}

/* The register and its one table, expanded in P4ReduceIngress itself and applied after the
 * passes' branches, as the lane pairs are (value_aggregation.p4). A duplicate reads the key
 * only when its round is complete (a cached RESULT). */
#define NEXT_KEY_DECLARATIONS                                                  \
    Register<bit<32>, bit<16>>(SLOT_ENTRIES, 0) next_key;                      \
    REGISTER_ACTION(bit<32>, bit<16>, next_key, first_step,                    \
                    NEXT_KEY_STEP_BODY(hdr.p4r.next_block, 1w1))               \
    REGISTER_ACTION(bit<32>, bit<16>, next_key, minimum_step,                  \
                    NEXT_KEY_STEP_BODY(hdr.p4r.next_block, 1w0))               \
    REGISTER_ACTION(bit<32>, bit<16>, next_key, read_step, READ_BODY)          \
    action first_key() {                                                       \
        hdr.p4r.next_block = first_step.execute(meta.slot_index_16);           \
    }                                                                          \
    action minimum_key() {                                                     \
        hdr.p4r.next_block = minimum_step.execute(meta.slot_index_16);         \
    }                                                                          \
    action read_key() {                                                        \
        hdr.p4r.next_block = read_step.execute(meta.slot_index_16);            \
    }                                                                          \
    PROTOCOL_TAIL_STAGE                                                        \
    table next_key_step {                                                      \
        key = { CONTRIBUTION_KEY }                                             \
        actions = { first_key; minimum_key; read_key; NoAction; }              \
        const entries = {                                                      \
            CONTRIBUTION_ENTRIES(LANE_OP_CONTRIBUTE, read_key, first_key,      \
                                 minimum_key)                                  \
            CONTRIBUTION_ENTRIES(LANE_OP_ANNOUNCE, read_key, first_key,        \
                                 minimum_key)                                  \
            STORE_ENTRY(first_key)                                             \
        }                                                                      \
        const default_action = NoAction();                                     \
        size = 80;                                                             \
    }
#endif
