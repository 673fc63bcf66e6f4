/* Silent rounds on TNA (docs/protocol.md section 6, docs/tofino.md "Silent rounds on TNA"):
 * ../v1model/rank_next.p4 and expected_ranks.p4 for a Tofino 2 pipeline, for jobs of at most
 * SILENT_RANKS ranks (bridge.p4: P4REDUCE_SILENT_ROUNDS, Tofino 2 only).
 *
 * v1model reads the N cells of one register in one action. A Tofino pipeline accesses a
 * register array once per pass, so every rank r < SILENT_RANKS has its own array,
 * `rank_next_r` (one 32-bit cell per pool slot: the key next_block[23:0] ++ ~next_exponent),
 * and its own stateful ALU. Every contribution of a silent job that its round takes (the
 * winner check returned its bit) runs all of them in its one pass: its own rank's step
 * writes its key, every other rank's step reads the cell (a rank outside the job reads as
 * the largest key). Then, in the stages after:
 *
 *   the winner, the minimum of the eight keys, as a tree of two-input minimums (3 stages);
 *   each rank's key xor the winner (its block is the winner's exactly when bits 31..8 are
 *   0), and the winner into the round's next_key cell and the packet's next_block (1
 *   stage: the next key's step, next_block.p4);
 *   one gateway per rank turns that into a bit (1 stage), an identity hash gathers the
 *   bits into the expected-ranks mask (1 stage);
 *   `expected` (per slot and version) stores the mask, or reads it for a cached RESULT (1
 *   stage), into the bridge, whose read-out pass stores it with the winner in
 *   round_winner's cell (round_winner.p4). A rank outside the job (which reads as the
 *   largest key) has its bit set when the winner is END_OF_STREAM: the next round's check
 *   ANDs the mask with the job's ranks (p4reduce.p4, round_expected).
 *
 * Only the packet that completes the round uses the result; every earlier one computes a
 * partial winner from keys not yet announced for this round, which the next key's step
 * overwrites (next_block.p4) and the completing packet's overwrites last. */
#ifndef P4REDUCE_TNA_RANK_NEXT_P4
#define P4REDUCE_TNA_RANK_NEXT_P4

#define ALL_KEYS 32w0xFFFFFFFF

/* rank r's register, its two steps and the table that chooses one by the sender's rank */
#define RANK_NEXT_STEPS(r)                                                     \
    Register<bit<32>, bit<16>>(POOL_SLOTS, 0) rank_next_##r;                   \
    RegisterAction<bit<32>, bit<16>, bit<32>>(rank_next_##r) own_key_##r = {   \
        void apply(inout bit<32> value, out bit<32> rv) {                      \
            value = hdr.p4r.next_block;                                        \
            rv = value;                                                        \
        }                                                                      \
    };                                                                         \
    RegisterAction<bit<32>, bit<16>, bit<32>>(rank_next_##r) read_key_##r = {  \
        void apply(inout bit<32> value, out bit<32> rv) {                      \
            if (meta.worker_count > r) {                                       \
                rv = value;                                                    \
            } else {                                                           \
                rv = ALL_KEYS;                                                 \
            }                                                                  \
        }                                                                      \
    };                                                                         \
    bit<32> key_##r;                                                           \
    bit<1> same_##r;                                                           \
    action own_##r() {                                                         \
        key_##r = own_key_##r.execute(meta.pool_slot_16);                      \
    }                                                                          \
    action read_##r() {                                                        \
        key_##r = read_key_##r.execute(meta.pool_slot_16);                     \
    }                                                                          \
    table rank_next_step_##r {                                                 \
        key = { hdr.p4r.rank: ternary @name("rank"); }                         \
        actions = { own_##r; read_##r; NoAction; }                             \
        const entries = { r: own_##r(); _: read_##r(); }                       \
        const default_action = NoAction();                                     \
        size = 2;                                                              \
    }

#if SILENT_RANKS == 8
#define FOR_EACH_SILENT_RANK(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#else
#define FOR_EACH_SILENT_RANK(X) X(0) X(1) X(2) X(3)
#endif
#define RANK_NEXT_APPLY_ONE(r) rank_next_step_##r.apply();
#define SAME_BLOCK(r)                                                          \
    same_##r = 0;                                                              \
    if (key_##r[31:8] == 0) {                                                  \
        same_##r = 1;                                                          \
    }

/* The minimum tree, in place to spare PHV (the keys stay: the expected ranks read them):
 * the winner ends in silent_winner. */
#define XOR_WINNER(r) key_##r = key_##r ^ silent_winner;
#if SILENT_RANKS == 8
#define MINIMUM_TREE                                                           \
    bit<32> silent_winner; bit<32> min_23; bit<32> min_45; bit<32> min_67;     \
    action minimum_1() {                                                       \
        silent_winner = min(key_0, key_1);                                     \
        min_23 = min(key_2, key_3);                                            \
        min_45 = min(key_4, key_5);                                            \
        min_67 = min(key_6, key_7);                                            \
    }                                                                          \
    action minimum_2() {                                                       \
        silent_winner = min(silent_winner, min_23);                            \
        min_45 = min(min_45, min_67);                                          \
    }                                                                          \
    action minimum_3() {                                                       \
        silent_winner = min(silent_winner, min_45);                            \
    }                                                                          \
    action to_winner() {                                                       \
        FOR_EACH_SILENT_RANK(XOR_WINNER)                                       \
    }
#define MINIMUM_APPLY minimum_1(); minimum_2(); minimum_3(); to_winner();
#define SAME_BITS same_7, same_6, same_5, same_4, same_3, same_2, same_1, same_0
#else
#define MINIMUM_TREE                                                           \
    bit<32> silent_winner; bit<32> min_23;                                     \
    action minimum_1() {                                                       \
        silent_winner = min(key_0, key_1);                                     \
        min_23 = min(key_2, key_3);                                            \
    }                                                                          \
    action minimum_2() {                                                       \
        silent_winner = min(silent_winner, min_23);                            \
    }                                                                          \
    action to_winner() {                                                       \
        FOR_EACH_SILENT_RANK(XOR_WINNER)                                       \
    }
#define MINIMUM_APPLY minimum_1(); minimum_2(); to_winner();
#define SAME_BITS 4w0, same_3, same_2, same_1, same_0
#endif

#define SILENT_DECLARATIONS                                                    \
    FOR_EACH_SILENT_RANK(RANK_NEXT_STEPS)                                      \
    bit<1> silent_step;     /* a silent job's contribution its round takes */  \
    bit<8> silent_mask;                                                        \
    Hash<bit<8>>(HashAlgorithm_t.IDENTITY) mask_hash;                          \
    MINIMUM_TREE                                                               \
    action gather_mask() {                                                     \
        silent_mask = mask_hash.get({ SAME_BITS });                            \
    }                                                                          \
    /* the next round's expected ranks, per (slot, version): stored by every contribution \
     * its round takes (the completing one last), read by a cached RESULT */  \
    Register<bit<8>, bit<16>>(SLOT_ENTRIES, 0) expected;                       \
    RegisterAction<bit<8>, bit<16>, bit<8>>(expected) expected_store = {       \
        void apply(inout bit<8> value, out bit<8> rv) {                        \
            value = silent_mask;                                               \
            rv = value;                                                        \
        }                                                                      \
    };                                                                         \
    RegisterAction<bit<8>, bit<16>, bit<8>>(expected) expected_read = {        \
        void apply(inout bit<8> value, out bit<8> rv) {                        \
            rv = value;                                                        \
        }                                                                      \
    };                                                                         \
    action store_expected() {                                                  \
        hdr.bridge.expected = expected_store.execute(meta.slot_index_16);      \
    }                                                                          \
    action read_expected() {                                                   \
        hdr.bridge.expected = expected_read.execute(meta.slot_index_16);       \
    }                                                                          \
    table expected_step {                                                      \
        key = { meta.round_mode: ternary @name("round_mode");                  \
                meta.lane_op: ternary @name("lane_op");                        \
                silent_step: ternary @name("silent_step");                     \
                meta.state_lost: ternary @name("state_lost");                  \
                meta.bitmap_before: ternary @name("bitmap_before"); }          \
        actions = { store_expected; read_expected; NoAction; }                 \
        const entries = {                                                      \
            (ROUND_MODE_SILENT, LANE_OP_CONTRIBUTE, _, 0, ROUND_COMPLETE): read_expected(); \
            (ROUND_MODE_SILENT, LANE_OP_ANNOUNCE, _, 0, ROUND_COMPLETE): read_expected(); \
            (ROUND_MODE_SILENT, _, 1, 0, _): store_expected();                 \
        }                                                                      \
        const default_action = NoAction();                                     \
        size = 3;                                                              \
    }

/* in the contribution branch, right after the winner check: the keys */
#define SILENT_KEYS_APPLY                                                      \
    if (meta.round_mode == ROUND_MODE_SILENT && meta.joining_bit != 0) {       \
        silent_step = 1;                                                       \
        FOR_EACH_SILENT_RANK(RANK_NEXT_APPLY_ONE)                              \
    }
/* after both passes' branches, before the next key's step: the winner and the mask */
#define SILENT_WINNER_APPLY                                                    \
    if (silent_step == 1) {                                                    \
        MINIMUM_APPLY                                                          \
        FOR_EACH_SILENT_RANK(SAME_BLOCK)                                       \
        gather_mask();                                                         \
    }                                                                          \
    expected_step.apply();
#endif
