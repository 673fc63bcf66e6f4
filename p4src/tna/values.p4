/* The value lanes on TNA: two adjacent headers, the first and the second half of a block
 * of TNA_BLOCK_VALUES int32 -- the same 4 * K bytes on the wire as a block of K values
 * (docs/protocol.md section 2). A lane pair's register (value_aggregation.p4) adds lane p of
 * values_0 and lane p of values_1, as SwitchML feeds each stateful ALU from its d0 and d1
 * headers. (The fields of values_1 are named v32.. whatever K is, so that pair p is always
 * (v<p>, v<p+32>).)
 *
 * The block size is the chip's: Tofino 2 carries 64 values, Tofino 1 TNA_BLOCK_VALUES_T1,
 * what fits one pass in its 12 stages (docs/tofino.md, "One pass on Tofino 1": the
 * arithmetic). p4reduce/target.py (Target.block_sizes) gives the controller the same number,
 * which tests/test_tofino_build.py checks against the compiled pairs. */
#ifndef P4REDUCE_TNA_VALUES_P4
#define P4REDUCE_TNA_VALUES_P4
#include "../common/types.p4"
#ifndef TNA_BLOCK_VALUES_T1
#define TNA_BLOCK_VALUES_T1 28
#endif
#if __TARGET_TOFINO__ == 2
#define TNA_BLOCK_VALUES 64
#else
#define TNA_BLOCK_VALUES TNA_BLOCK_VALUES_T1
#endif
#define TNA_PAIRS (TNA_BLOCK_VALUES / 2)
/* the lengths of a message with values (Validation, the parser, Result) */
#define TNA_UDP_LEN_WITH_VALUES ((bit<16>)(8 + P4R_HEADER_BYTES + 4 * TNA_BLOCK_VALUES))
#define TNA_IPV4_LEN_WITH_VALUES ((bit<16>)(28 + P4R_HEADER_BYTES + 4 * TNA_BLOCK_VALUES))

/* The pairs (pair, lane of values_0, lane of values_1), two at a time up to TNA_PAIRS. */
#if TNA_PAIRS > 0
#define TNA_PAIRS_0(X) X(0, 0, 32) X(1, 1, 33)
#else
#define TNA_PAIRS_0(X)
#endif
#if TNA_PAIRS > 2
#define TNA_PAIRS_1(X) X(2, 2, 34) X(3, 3, 35)
#else
#define TNA_PAIRS_1(X)
#endif
#if TNA_PAIRS > 4
#define TNA_PAIRS_2(X) X(4, 4, 36) X(5, 5, 37)
#else
#define TNA_PAIRS_2(X)
#endif
#if TNA_PAIRS > 6
#define TNA_PAIRS_3(X) X(6, 6, 38) X(7, 7, 39)
#else
#define TNA_PAIRS_3(X)
#endif
#if TNA_PAIRS > 8
#define TNA_PAIRS_4(X) X(8, 8, 40) X(9, 9, 41)
#else
#define TNA_PAIRS_4(X)
#endif
#if TNA_PAIRS > 10
#define TNA_PAIRS_5(X) X(10, 10, 42) X(11, 11, 43)
#else
#define TNA_PAIRS_5(X)
#endif
#if TNA_PAIRS > 12
#define TNA_PAIRS_6(X) X(12, 12, 44) X(13, 13, 45)
#else
#define TNA_PAIRS_6(X)
#endif
#if TNA_PAIRS > 14
#define TNA_PAIRS_7(X) X(14, 14, 46) X(15, 15, 47)
#else
#define TNA_PAIRS_7(X)
#endif
#if TNA_PAIRS > 16
#define TNA_PAIRS_8(X) X(16, 16, 48) X(17, 17, 49)
#else
#define TNA_PAIRS_8(X)
#endif
#if TNA_PAIRS > 18
#define TNA_PAIRS_9(X) X(18, 18, 50) X(19, 19, 51)
#else
#define TNA_PAIRS_9(X)
#endif
#if TNA_PAIRS > 20
#define TNA_PAIRS_10(X) X(20, 20, 52) X(21, 21, 53)
#else
#define TNA_PAIRS_10(X)
#endif
#if TNA_PAIRS > 22
#define TNA_PAIRS_11(X) X(22, 22, 54) X(23, 23, 55)
#else
#define TNA_PAIRS_11(X)
#endif
#if TNA_PAIRS > 24
#define TNA_PAIRS_12(X) X(24, 24, 56) X(25, 25, 57)
#else
#define TNA_PAIRS_12(X)
#endif
#if TNA_PAIRS > 26
#define TNA_PAIRS_13(X) X(26, 26, 58) X(27, 27, 59)
#else
#define TNA_PAIRS_13(X)
#endif
#if TNA_PAIRS > 28
#define TNA_PAIRS_14(X) X(28, 28, 60) X(29, 29, 61)
#else
#define TNA_PAIRS_14(X)
#endif
#if TNA_PAIRS > 30
#define TNA_PAIRS_15(X) X(30, 30, 62) X(31, 31, 63)
#else
#define TNA_PAIRS_15(X)
#endif
#define TNA_LANE_PAIRS(X) TNA_PAIRS_0(X) TNA_PAIRS_1(X) TNA_PAIRS_2(X) TNA_PAIRS_3(X) TNA_PAIRS_4(X) TNA_PAIRS_5(X) TNA_PAIRS_6(X) TNA_PAIRS_7(X) TNA_PAIRS_8(X) TNA_PAIRS_9(X) TNA_PAIRS_10(X) TNA_PAIRS_11(X) TNA_PAIRS_12(X) TNA_PAIRS_13(X) TNA_PAIRS_14(X) TNA_PAIRS_15(X)

#define LANE_FIELD_0(p, l, h) lane_t v##l;
#define LANE_FIELD_1(p, l, h) lane_t v##h;
header values_0_t {
    TNA_LANE_PAIRS(LANE_FIELD_0)
}
header values_1_t {
    TNA_LANE_PAIRS(LANE_FIELD_1)
}
#undef LANE_FIELD_0
#undef LANE_FIELD_1
#endif

#define P4REDUCE_ARCH_VALUES values_0_t values_0; values_1_t values_1;
