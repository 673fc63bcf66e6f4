/* Register-action body of the drop simulator's sequence (docs/protocol.md section 14); see
 * contributor_bitmap.p4 for what a body is. bit<32> per job: rv = this packet's sequence
 * number, the cell counts on. */
#ifndef P4REDUCE_BODIES_DROP_SIMULATOR_P4
#define P4REDUCE_BODIES_DROP_SIMULATOR_P4
#define SEQUENCE_BODY                                                          \
    rv = value;                                                                \
    value = value + 1;
#endif
