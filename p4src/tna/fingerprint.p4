/* Fingerprint on TNA (../v1model/fingerprint.p4 explains it): two registers, so each
 * stateful ALU returns one of minimum and maximum; the steps are the shared bodies of
 * ../common/bodies/fingerprint.p4. */
#ifndef P4REDUCE_TNA_FINGERPRINT_P4
#define P4REDUCE_TNA_FINGERPRINT_P4

control Fingerprint(inout headers_t hdr, inout metadata_t meta) {
    Register<bit<32>, bit<16>>(SLOT_ENTRIES, 0) fingerprint_min;
    Register<bit<32>, bit<16>>(SLOT_ENTRIES, 0) fingerprint_max;
    REGISTER_ACTION(bit<32>, bit<16>, fingerprint_min, min_step, FINGERPRINT_MIN_BODY)
    REGISTER_ACTION(bit<32>, bit<16>, fingerprint_max, max_step, FINGERPRINT_MAX_BODY)
    REGISTER_ACTION(bit<32>, bit<16>, fingerprint_min, read_min_step, READ_BODY)
    REGISTER_ACTION(bit<32>, bit<16>, fingerprint_max, read_max_step, READ_BODY)

    apply {
        if (hdr.fingerprint.isValid()) {
            if (meta.seen == 0) {
#if P4REDUCE_WINNER_CHECK
                if (meta.in_round == 1) {                       /* not stale */
#endif
                    hdr.fingerprint.fingerprint_min = min_step.execute(meta.slot_index_16);
                    hdr.fingerprint.fingerprint_max = max_step.execute(meta.slot_index_16);
#if P4REDUCE_WINNER_CHECK
                }
#endif
            } else {
                hdr.fingerprint.fingerprint_min = read_min_step.execute(meta.slot_index_16);
                hdr.fingerprint.fingerprint_max = read_max_step.execute(meta.slot_index_16);
            }
        }
    }
}
#endif
