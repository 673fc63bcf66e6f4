/* v1model adapter for the shared register-action bodies (common/bodies/): a stateful step
 * is a read-modify-write of one register cell inside an action -- read into `value`, run
 * the body (which may set `rv`), write `value` back, hand `rv` to RV. bmv2 runs an action
 * atomically with respect to the register arrays it touches, as one stateful ALU does.
 *
 * v1model registers hold bit<W>, not structs: a pair_t cell is a bit<64> (hi ++ lo), and
 * PAIR_STEP packs and unpacks it. AFTER runs between the body and the write (v1model only:
 * e.g. the overflow check, which needs what a Tofino ALU cannot return). */
#ifndef P4REDUCE_V1MODEL_REGISTER_STEP_P4
#define P4REDUCE_V1MODEL_REGISTER_STEP_P4

#define REGISTER_STEP(REG, INDEX, T, RV, BODY)                                 \
    REGISTER_STEP_THEN(REG, INDEX, T, RV, BODY, )

/* ... with AFTER run between the body and the write, `stored` holding the cell as read. */
#define REGISTER_STEP_THEN(REG, INDEX, T, RV, BODY, AFTER)                     \
    {                                                                          \
        T value;                                                               \
        T rv;                                                                  \
        REG.read(value, INDEX);                                                \
        T stored = value;                                                      \
        BODY                                                                   \
        AFTER                                                                  \
        REG.write(INDEX, value);                                               \
        RV = rv;                                                               \
    }

#define PAIR_STEP(REG, INDEX, RV, BODY, AFTER)                                 \
    {                                                                          \
        bit<64> cell;                                                          \
        REG.read(cell, INDEX);                                                 \
        pair_t value = { cell[31:0], cell[63:32] };                            \
        pair_t stored = value;                                                 \
        bit<32> rv;                                                            \
        BODY                                                                   \
        AFTER                                                                  \
        REG.write(INDEX, value.hi ++ value.lo);                                \
        RV = rv;                                                               \
    }
#endif
