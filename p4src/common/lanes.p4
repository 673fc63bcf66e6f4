/* The LANES (64) value lanes of a block, listed once. Controls expand a per-lane macro over
 * them (P4 has no loops, and a Tofino-class target needs one register array per pair of
 * lanes). */
#ifndef P4REDUCE_LANES_P4
#define P4REDUCE_LANES_P4
#define FOR_EACH_LANE(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31) X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47) X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57) X(58) X(59) X(60) X(61) X(62) X(63)
/* The same lanes as LANES/2 pairs (pair, low lane, high lane): one register cell per pair
 * (common/bodies/value_aggregation.p4). */
#define FOR_EACH_LANE_PAIR(X) X(0, 0, 1) X(1, 2, 3) X(2, 4, 5) X(3, 6, 7) X(4, 8, 9) X(5, 10, 11) X(6, 12, 13) X(7, 14, 15) X(8, 16, 17) X(9, 18, 19) X(10, 20, 21) X(11, 22, 23) X(12, 24, 25) X(13, 26, 27) X(14, 28, 29) X(15, 30, 31) X(16, 32, 33) X(17, 34, 35) X(18, 36, 37) X(19, 38, 39) X(20, 40, 41) X(21, 42, 43) X(22, 44, 45) X(23, 46, 47) X(24, 48, 49) X(25, 50, 51) X(26, 52, 53) X(27, 54, 55) X(28, 56, 57) X(29, 58, 59) X(30, 60, 61) X(31, 62, 63)
#endif
