/* Register-action body of a slot's pending rewind position (docs/protocol.md section 6,
 * silent rounds); see contributor_bitmap.p4 for what a body is. bit<32> per pool slot: the
 * smallest position a REWIND request named since the slot's last round completed,
 * END_OF_STREAM when none. FRESH (the slot took a new epoch) forgets what another job left;
 * TAKE (a REWIND request) keeps the minimum with POSITION; rv = the pending position after
 * this packet; DONE (the packet completes a round, which applies rv) clears it. */
#ifndef P4REDUCE_BODIES_REWIND_P4
#define P4REDUCE_BODIES_REWIND_P4
#define REWIND_BODY(FRESH, TAKE, POSITION, DONE)                               \
    if (FRESH) {                                                               \
        value = END_OF_STREAM;                                                 \
    }                                                                          \
    if (TAKE && POSITION < value) {                                            \
        value = POSITION;                                                      \
    }                                                                          \
    rv = value;                                                                \
    if (DONE) {                                                                \
        value = END_OF_STREAM;                                                 \
    }
#endif
