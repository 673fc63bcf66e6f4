/* The 64 value lanes on TNA: two adjacent 32-lane headers, lanes 0..31 and 32..63 -- the
 * same 256 bytes on the wire as a block of 64 int32 (docs/protocol.md section 2). A lane
 * pair's register (value_aggregation.p4) adds lane i and lane i + 32, one from each
 * header, as SwitchML feeds each stateful ALU from its d0 and d1 headers. */
#ifndef P4REDUCE_TNA_VALUES_P4
#define P4REDUCE_TNA_VALUES_P4
#include "../common/types.p4"
#include "../common/lanes.p4"
#define LANE_FIELD(i) lane_t v##i;
header values_0_t {
    FOR_EACH_LANE_0(LANE_FIELD)
}
header values_1_t {
    FOR_EACH_LANE_1(LANE_FIELD)
}
#undef LANE_FIELD
#endif

#define P4REDUCE_ARCH_VALUES values_0_t values_0; values_1_t values_1;
