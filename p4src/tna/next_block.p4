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
    SILENT_WINNER_STEP                                                         \
    action first_key() {                                                       \
        hdr.p4r.next_block = first_step.execute(meta.slot_index_16);           \
    }                                                                          \
    action minimum_key() {                                                     \
        hdr.p4r.next_block = minimum_step.execute(meta.slot_index_16);         \
    }                                                                          \
    action read_key() {                                                        \
        hdr.p4r.next_block = read_step.execute(meta.slot_index_16);            \
    }                                                                          \
    SILENT_WINNER_KEY                                                          \
    PROTOCOL_TAIL_STAGE                                                        \
    table next_key_step {                                                      \
        key = { NEXT_KEY_KEY }                                                 \
        actions = { first_key; minimum_key; read_key; SILENT_WINNER_ACTION NoAction; } \
        const entries = {                                                      \
            CONTRIBUTION_ENTRIES(KEY_OP(LANE_OP_CONTRIBUTE), read_key,         \
                                 first_key, minimum_key)                       \
            CONTRIBUTION_ENTRIES(KEY_OP(LANE_OP_ANNOUNCE), read_key,           \
                                 first_key, minimum_key)                       \
            SILENT_KEY_ENTRIES                                                 \
            NEXT_KEY_STORE_ENTRY                                               \
        }                                                                      \
        const default_action = NoAction();                                     \
        size = NEXT_KEY_SIZE;                                                  \
    }

/* Silent rounds (rank_next.p4): a silent job's contribution carries the winner of the keys
 * in next_block, not its own key, and overwrites the cell (the completing packet's
 * overwrite is the round's); the table's first key field is then key_op, the sender's
 * silent_step ++ lane_op (one field: an entry's ops are single values). */
#if P4REDUCE_SILENT_ROUNDS
#define NEXT_KEY_KEY                                                           \
        key_op: ternary @name("lane_op");                                      \
        meta.state_lost: ternary;                                              \
        meta.in_round: ternary;                                                \
        hdr.p4r.rank[4:0]: ternary;                                            \
        meta.bitmap_before: ternary;
#define KEY_OP(op) (1w0 ++ op)
#define SILENT_KEY_OP(op) (1w1 ++ op)
#define SILENT_KEY_ENTRIES                                                     \
    CONTRIBUTION_ENTRIES(SILENT_KEY_OP(LANE_OP_CONTRIBUTE), read_key,          \
                         winner_key, winner_key)                               \
    CONTRIBUTION_ENTRIES(SILENT_KEY_OP(LANE_OP_ANNOUNCE), read_key,            \
                         winner_key, winner_key)
/* the winner of the keys (rank_next.p4) overwrites the cell and comes back into next_block
 * (a stateful ALU's output: a move from silent_winner would tie next_block's containers to
 * the minimum tree's) */
#define SILENT_WINNER_STEP                                                     \
    RegisterAction<bit<32>, bit<16>, bit<32>>(next_key) winner_step = {        \
        void apply(inout bit<32> value, out bit<32> rv) {                      \
            value = silent_winner;                                             \
            rv = value;                                                        \
        }                                                                      \
    };
#define SILENT_WINNER_KEY                                                      \
    action winner_key() {                                                      \
        hdr.p4r.next_block = winner_step.execute(meta.slot_index_16);          \
    }
#define SILENT_WINNER_ACTION winner_key;
#if P4REDUCE_LEAF_ROLE
#define NEXT_KEY_STORE_ENTRY ((1w0 ++ LANE_OP_STORE), _, _, _, ROUND_COMPLETE): first_key();
#else
#define NEXT_KEY_STORE_ENTRY
#endif
#define NEXT_KEY_SIZE 160
#else
#define NEXT_KEY_KEY CONTRIBUTION_KEY
#define SILENT_WINNER_STEP
#define SILENT_WINNER_KEY
#define SILENT_WINNER_ACTION
#define KEY_OP(op) op
#define SILENT_KEY_ENTRIES
#define NEXT_KEY_STORE_ENTRY STORE_ENTRY(first_key)
#define NEXT_KEY_SIZE 80
#endif
#endif
