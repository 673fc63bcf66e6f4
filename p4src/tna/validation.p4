/* Validation on TNA (../v1model/validation.p4 has the rules). Difference: a TNA ingress
 * has no frame length, so trailing bytes beyond the IPv4 length cannot be seen here; the
 * IPv4 and UDP lengths are still checked, and only parsed fields are ever aggregated. */
#ifndef P4REDUCE_TNA_VALIDATION_P4
#define P4REDUCE_TNA_VALIDATION_P4

control Validation(inout headers_t hdr, inout metadata_t meta) {
    apply {
        meta.malformed = 0;
        if (meta.parser_error == 1 || meta.checksum_error == 1) {
            meta.malformed = 1;
        } else if (hdr.ipv4.isValid() && hdr.ipv4.dst_addr == meta.switch_ip
                   && (hdr.ipv4.version != 4 || hdr.ipv4.ihl != 5
                       || hdr.ipv4.flags[0:0] == 1 || hdr.ipv4.frag_offset != 0)) {
            meta.malformed = 1;
        } else if (hdr.p4r.isValid() && hdr.ipv4.dst_addr == meta.switch_ip) {
            bit<16> udp_len = UDP_LEN_HEADER_ONLY;
            if (hdr.p4r.msg_type == MSG_DATA) {
                udp_len = UDP_LEN_WITH_VALUES;
            } else if (hdr.p4r.msg_type == MSG_ANNOUNCE) {
                udp_len = UDP_LEN_WITH_FINGERPRINT;
            }
            if (hdr.p4r.protocol != PROTOCOL_VERSION
                    || hdr.p4r.msg_type == 0 || hdr.p4r.msg_type > MSG_SKIP
                    || hdr.p4r.block[31:24] != 0 || hdr.p4r.next_block[31:24] != 0
                    || hdr.udp.length != udp_len
                    || hdr.ipv4.total_len != udp_len + 20) {
                meta.malformed = 1;
            }
        }
    }
}
#endif
