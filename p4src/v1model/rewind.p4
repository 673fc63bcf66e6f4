/* Rewind (docs/protocol.md section 6, silent rounds), v1model. In a job of silent rounds a
 * rank that finds a gap in its chain of results asks the switch to re-aggregate the slot
 * from a stream position P: a REWIND request. Per pool slot the switch keeps the smallest
 * position pending (END_OF_STREAM: none); the packet that completes the slot's next round
 * applies it (RankNext: the round's result leaves as MSG_REWIND naming P, and the next
 * round is a rewind round every rank announces in) and clears it. A request is counted in
 * `rewinds`; one that is not a closing contribution is consumed here (Result drops it).
 * The step is the shared body of common/bodies/rewind.p4. */
#ifndef P4REDUCE_REWIND_P4
#define P4REDUCE_REWIND_P4
#include "../common/headers.p4"
#include "../common/bodies/rewind.p4"
#include "register_step.p4"

control Rewind(inout headers_t hdr, inout metadata_t meta) {
    register<bit<32>>(POOL_SLOTS) rewind;
    counter(MAX_JOBS, CounterType.packets) rewinds;

    action pending_position() {
        REGISTER_STEP(rewind, meta.pool_slot, bit<32>, meta.rewind_position,
                      REWIND_BODY(meta.same_epoch == 0, meta.rewind_taken == 1,
                                  hdr.p4r.next_block, meta.complete == 1))
        meta.rewound = (meta.complete == 1 && meta.rewind_position != END_OF_STREAM)
                       ? 1w1 : 1w0;
    }

    apply {
        if (meta.rewind_taken == 1 || meta.complete == 1 || meta.same_epoch == 0) {
            pending_position();
        }
        if (meta.rewind_taken == 1) {
            rewinds.count((bit<32>)meta.job_index);
        }
    }
}
#endif
