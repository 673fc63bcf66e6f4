/* Validation: what the switch accepts as a p4reduce packet before admission looks at it
 * (docs/protocol.md sections 1-3). A frame addressed to the switch's IPv4 that p4reduce
 * cannot read (IPv4 version other than 4, options, a fragment), a p4reduce header with
 * another protocol version, a message type workers do not send, a block index (or a
 * next_block: a REWIND's position) above 24 bits, or lengths (IPv4, UDP, the frame
 * itself) other than the message type's layout (a
 * DATA: 48 + 4K IPv4 bytes for K one of the block sizes, FOR_EACH_BLOCK_SIZE; a SKIP or
 * a REWIND: header only, or the same for K above SKIP_GROWS_TO_VALUES; an ANNOUNCE: the
 * fingerprint range, followed by such a block for K above SKIP_GROWS_TO_VALUES) is
 * malformed: dropped and counted, never aggregated -- trailing bytes would otherwise be
 * carried into results, and an over-long frame would make a result too large to send. */
#ifndef P4REDUCE_VALIDATION_P4
#define P4REDUCE_VALIDATION_P4
#include "../common/headers.p4"

control Validation(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    /* a p4reduce packet's checks, one action: a ternary outside an action becomes
     * conditions and a table per branch in bmv2, inside one it is a single expression */
    action check_p4reduce() {
        /* a DATA's length is one of the block sizes' exactly when the parser found
         * its values header (data_values != 0: parser.p4), a DATA without one is
         * malformed; a SKIP, and an ANNOUNCE after its fingerprint range, carry one
         * only above SKIP_GROWS_TO_VALUES (values.p4) */
        /* a RESULT or STATUS (a spine's, at a leaf: uplink.p4) has its message's
         * layout here, and so has a REWIND with values (a silent spine's result); Uplink
         * finds out whether the spine sent it */
        bit<16> ipv4_len = (hdr.p4r.msg_type == MSG_DATA
                            || meta.data_values > SKIP_GROWS_TO_VALUES
                            || ((hdr.p4r.msg_type == MSG_RESULT
                                 || hdr.p4r.msg_type == MSG_REWIND) && meta.data_values != 0))
            ? ((meta.data_values != 0) ? hdr.ipv4.total_len : 16w0)
            : ((hdr.p4r.msg_type == MSG_ANNOUNCE || hdr.fingerprint.isValid())
               ? IPV4_LEN_WITH_FINGERPRINT
               : ((hdr.p4r.msg_type == MSG_STATUS) ? IPV4_LEN_WITH_STATUS
                                                  : IPV4_LEN_HEADER_ONLY));
        meta.malformed = (hdr.p4r.protocol != PROTOCOL_VERSION
                          || hdr.p4r.msg_type == 0 || hdr.p4r.msg_type > MSG_REWIND
                          || hdr.p4r.block[31:24] != 0 || hdr.p4r.next_block[31:24] != 0
                          || hdr.ipv4.total_len != ipv4_len
                          || hdr.udp.length != ipv4_len - 20
                          || standard_metadata.packet_length
                             != (bit<32>)ipv4_len + ETHERNET_BYTES) ? 1w1 : 1w0;
    }

    apply {
        /* meta.malformed starts at 0 (v1model zeroes user metadata); one expression per
         * decision, since bmv2 pays per table and an assignment outside an action is one */
        if (standard_metadata.parser_error != error.NoError
                || standard_metadata.checksum_error == 1) {
            meta.malformed = 1;
        } else if (hdr.ipv4.isValid() && hdr.ipv4.dst_addr == meta.switch_ip
                   && (hdr.ipv4.version != 4 || hdr.ipv4.ihl != 5
                       || hdr.ipv4.flags[0:0] == 1 || hdr.ipv4.frag_offset != 0)) {
            meta.malformed = 1;
        } else if (hdr.p4r.isValid() && hdr.ipv4.dst_addr == meta.switch_ip) {
            check_p4reduce();
        }
    }
}
#endif
