/* The LANES (64) value lanes of a block, listed once. Controls expand a per-lane macro over
 * them (P4 has no loops, and a Tofino-class target needs one register array per pair of
 * lanes). */
#ifndef P4REDUCE_LANES_P4
#define P4REDUCE_LANES_P4
/* The first and the second half of the lanes: a TNA program carries them as two adjacent
 * 32-lane headers (tna/values.p4; the wire format is the same 256 bytes). */
#define FOR_EACH_LANE_0(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31)
#define FOR_EACH_LANE_1(X) X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47) X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57) X(58) X(59) X(60) X(61) X(62) X(63)
#define FOR_EACH_LANE(X) FOR_EACH_LANE_0(X) FOR_EACH_LANE_1(X)
/* The same lanes as LANES/2 pairs (pair, low lane, high lane): one register cell per pair
 * (common/bodies/value_aggregation.p4). Lane i is paired with lane i + 32, one from each
 * half, as SwitchML pairs its d0 and d1 headers: each stateful ALU then takes one 32-bit
 * input from each header, which bf-p4c places on the ALU's input crossbar. */
#define FOR_EACH_LANE_PAIR(X) X(0, 0, 32) X(1, 1, 33) X(2, 2, 34) X(3, 3, 35) X(4, 4, 36) X(5, 5, 37) X(6, 6, 38) X(7, 7, 39) X(8, 8, 40) X(9, 9, 41) X(10, 10, 42) X(11, 11, 43) X(12, 12, 44) X(13, 13, 45) X(14, 14, 46) X(15, 15, 47) X(16, 16, 48) X(17, 17, 49) X(18, 18, 50) X(19, 19, 51) X(20, 20, 52) X(21, 21, 53) X(22, 22, 54) X(23, 23, 55) X(24, 24, 56) X(25, 25, 57) X(26, 26, 58) X(27, 27, 59) X(28, 28, 60) X(29, 29, 61) X(30, 30, 62) X(31, 31, 63)
#endif
