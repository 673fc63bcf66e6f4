/* The spine role of silent rounds (docs/fabric.md, "Silent rounds on a fabric"), v1model.
 * A two-level job of silent rounds is aggregated by its leaves and then by the spine, whose
 * ranks are the leaves. Each leaf runs silent rounds towards its ranks, but towards the
 * spine it takes part in every round: its partial when some of its ranks sent, else an
 * empty one it makes itself from the spine's result (uplink.p4, EmptyPartial). So the
 * spine expects every leaf in every round: the packet that completes a round stores the
 * job's full mask as the next round's expected ranks instead of the leaves whose minimum
 * is the winner (RankNext). The spine then never completes a round before every leaf
 * holds the result of the round before it, and a result a leaf lost is still cached at
 * the spine when the leaf sends its partial again: the spine runs at most one round ahead
 * of any leaf, as in every-rank rounds. Every other rule of silent rounds holds at the
 * spine unchanged (round kinds, the winner, rewinds, ENDED, the fingerprint).
 *
 * A job with an entry here is such a spine's; one without (a one-switch job, a leaf's)
 * expects the ranks whose next block is the winner. */
#ifndef P4REDUCE_SILENT_SPINE_P4
#define P4REDUCE_SILENT_SPINE_P4
#include "../common/headers.p4"

control SilentSpine(inout headers_t hdr, inout metadata_t meta) {
    action every_leaf() {
        meta.every_leaf = 1;
    }
    action leaves_when_named() {
        meta.every_leaf = 0;
    }
    table silent_spine {
        key = { hdr.p4r.job: exact @name("job"); }
        actions = { every_leaf; leaves_when_named; }
        default_action = leaves_when_named();
        size = MAX_JOBS;
    }

    apply {
        silent_spine.apply();
    }
}
#endif
