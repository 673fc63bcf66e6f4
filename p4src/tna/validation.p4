/* Validation on TNA (../v1model/validation.p4 has the rules). Differences: a TNA ingress
 * has no frame length, so trailing bytes beyond the IPv4 length cannot be seen here; the
 * IPv4 and UDP lengths are still checked, and only parsed fields are ever aggregated. The
 * rules are evaluated for every IPv4 packet, and p4reduce.p4 acts on the verdict only for a
 * packet addressed to the switch (as v1model): so the verdict does not wait for the address
 * comparison, a stage later. */
#ifndef P4REDUCE_TNA_VALIDATION_P4
#define P4REDUCE_TNA_VALIDATION_P4
/* the last message type a switch takes in: a leaf takes the spine's RESULT and STATUS */
#if P4REDUCE_LEAF_ROLE
#define LAST_MSG_IN MSG_STATUS
#else
#define LAST_MSG_IN MSG_SKIP
#endif

control Validation(inout headers_t hdr, inout metadata_t meta) {
    /* The rules of ../v1model/validation.p4, as conditions a Tofino gateway can evaluate:
     * each compares fields with constants and reads at most 4 bytes (+12 bits). */
    apply {
        meta.malformed = 0;
        if (meta.parser_error == 1 || meta.checksum_error == 1) {
            meta.malformed = 1;
        } else if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.version != 4 || hdr.ipv4.ihl != 5
                    || hdr.ipv4.flags[0:0] == 1 || hdr.ipv4.frag_offset != 0) {
                meta.malformed = 1;
            } else if (hdr.p4r.isValid()) {
                if (hdr.p4r.protocol != PROTOCOL_VERSION
                        || hdr.p4r.msg_type == 0 || hdr.p4r.msg_type > LAST_MSG_IN) {
                    meta.malformed = 1;
                } else if (hdr.p4r.block[31:24] != 0 || hdr.p4r.next_block[31:24] != 0) {
                    meta.malformed = 1;
                } else if (hdr.p4r.msg_type == MSG_DATA) {
                    if (hdr.udp.length != TNA_UDP_LEN_WITH_VALUES
                            || hdr.ipv4.total_len != TNA_IPV4_LEN_WITH_VALUES) {
                        meta.malformed = 1;
                    }
                } else if (hdr.p4r.msg_type == MSG_ANNOUNCE) {
                    if (hdr.udp.length != UDP_LEN_WITH_FINGERPRINT
                            || hdr.ipv4.total_len != IPV4_LEN_WITH_FINGERPRINT) {
                        meta.malformed = 1;
                    }
#if P4REDUCE_LEAF_ROLE
                } else if (hdr.p4r.msg_type == MSG_RESULT) {
                    /* the spine's (p4reduce.p4 drops one from anywhere else): with values,
                     * a fingerprint range, or header only (STATE_LOST) */
                    if (hdr.udp.length != TNA_UDP_LEN_WITH_VALUES
                            && hdr.udp.length != UDP_LEN_WITH_FINGERPRINT
                            && hdr.udp.length != UDP_LEN_HEADER_ONLY) {
                        meta.malformed = 1;
                    }
                } else if (hdr.p4r.msg_type == MSG_STATUS) {
                    if (hdr.udp.length != UDP_LEN_WITH_STATUS) {
                        meta.malformed = 1;
                    }
#endif
                } else if (hdr.udp.length != UDP_LEN_HEADER_ONLY
                           || hdr.ipv4.total_len != IPV4_LEN_HEADER_ONLY) {
                    meta.malformed = 1;
                }
            }
        }
    }
}
#endif
