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
    action length_ok() {
        meta.malformed = 0;
    }
    action length_wrong() {
        meta.malformed = 1;
    }
    /* each message type's lengths as one const table (fewer gateways in stages 0-2) */
    table message_length {
        key = { hdr.p4r.msg_type: exact @name("msg_type");
                hdr.udp.length: exact @name("udp_length");
                hdr.ipv4.total_len: exact @name("ipv4_length"); }
        actions = { length_ok; length_wrong; }
        const entries = {
            (MSG_DATA, TNA_UDP_LEN_WITH_VALUES, TNA_IPV4_LEN_WITH_VALUES): length_ok();
            (MSG_ANNOUNCE, UDP_LEN_WITH_FINGERPRINT, IPV4_LEN_WITH_FINGERPRINT): length_ok();
            (MSG_SKIP, UDP_LEN_HEADER_ONLY, IPV4_LEN_HEADER_ONLY): length_ok();
#if P4REDUCE_LEAF_ROLE
            (MSG_RESULT, TNA_UDP_LEN_WITH_VALUES, TNA_IPV4_LEN_WITH_VALUES): length_ok();
            (MSG_RESULT, UDP_LEN_WITH_FINGERPRINT, IPV4_LEN_WITH_FINGERPRINT): length_ok();
            (MSG_RESULT, UDP_LEN_HEADER_ONLY, IPV4_LEN_HEADER_ONLY): length_ok();
            (MSG_STATUS, UDP_LEN_WITH_STATUS, IPV4_LEN_WITH_STATUS): length_ok();
#endif
        }
        const default_action = length_wrong();
        size = 8;
    }

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
                } else {
                    message_length.apply();
                }
            }
        }
    }
}
#endif
