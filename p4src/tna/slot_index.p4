/* The register index of a (pool slot, version): pool_slot * 2 + slot_version, as on v1model,
 * in 16 bits. Computed by a shift and, for version 1, an OR of a constant: a concatenation
 * (pool_slot[14:0] ++ slot_version) would pin pool_slot, a field of the bridge header, to bit
 * 1 of its container, which the bridge header's layout forbids. Admission and the harvest
 * pass use it. */
#ifndef P4REDUCE_TNA_SLOT_INDEX_P4
#define P4REDUCE_TNA_SLOT_INDEX_P4
control SlotIndex(inout metadata_t meta, in bit<1> slot_version) {
    action double_slot() {
        meta.slot_index_16 = meta.pool_slot_16 << 1;
    }
    action odd_version() {
        meta.slot_index_16 = meta.slot_index_16 | 1;
    }
    apply {
        double_slot();
        if (slot_version == 1) {
            odd_version();
        }
    }
}
#endif
