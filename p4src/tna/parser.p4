/* TNA parsers and deparsers. The p4reduce headers are parsed as on v1model
 * (../v1model/parser.p4); the egress parser starts with the bridged metadata and stops
 * after the p4reduce header: egress rewrites only addresses, ports and the rank, and the
 * extension (values, fingerprint or round status) follows as payload. (Parsing the 256
 * bytes of values there made the egress parse path 394 bytes, beyond Tofino's 160-byte
 * egress parse depth.) Parser errors and the IPv4 checksum check end in meta.parser_error
 * / meta.checksum_error, which Validation reads. */
#ifndef P4REDUCE_TNA_PARSER_P4
#define P4REDUCE_TNA_PARSER_P4

parser P4ReduceIngressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                             out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.checksum_error = 0;     /* parse_ipv4 sets it; Validation reads it for every packet */
        transition select(ig_intr_md.ingress_port) {
            HARVEST_PORT: parse_harvest;
            default: parse_ethernet;
        }
    }
    /* the harvest pass: the bridge header the first pass left in front of the frame */
    state parse_harvest {
        pkt.extract(hdr.bridge);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }
    state parse_arp {
        pkt.extract(hdr.arp);
        transition accept;
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        meta.checksum_error = (bit<1>)ipv4_checksum.verify();
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.flags[0:0],
                          hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w4, 4w5, 1w0, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            P4REDUCE_UDP_BASE &&& P4REDUCE_UDP_MASK: parse_p4reduce;
            default: accept;
        }
    }
    state parse_p4reduce {
        pkt.extract(hdr.p4r);
        transition select(hdr.p4r.msg_type) {
            MSG_DATA: parse_values;
            MSG_ANNOUNCE: parse_fingerprint;
            MSG_RESULT: parse_by_length;    /* a RESULT recirculated for its low lanes */
            MSG_SKIP: parse_by_length;      /* a SKIP on its lane pass (Tofino 1) */
            default: accept;
        }
    }
    /* A worker's SKIP is header only (anything else is malformed, validation.p4); a SKIP
     * that takes the lane pass carries the zero lanes its first pass added, and says so
     * in its UDP length (result.p4, send_to_lane_pass). */
    state parse_by_length {
        transition select(hdr.udp.length) {
            TNA_UDP_LEN_WITH_VALUES: parse_values;
            UDP_LEN_WITH_FINGERPRINT: parse_fingerprint;
            default: accept;
        }
    }
    state parse_fingerprint {
        pkt.extract(hdr.fingerprint);
        transition accept;
    }
    state parse_values {
        pkt.extract(hdr.values_0);
        pkt.extract(hdr.values_1);
        transition accept;
    }
}

control P4ReduceIngressDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                                in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
                hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        pkt.emit(hdr);
    }
}

parser P4ReduceEgressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                            out egress_intrinsic_metadata_t eg_intr_md) {
    /* Only what egress rewrites is parsed: the headers of a packet to a worker. A packet on
     * its way to the harvest pass (it keeps the bridge header: the harvest pass reads it)
     * and an ordinary forwarded frame go through as payload (egress PHV is the same pool
     * as ingress PHV, which the value lanes fill). */
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);
        transition select(hdr.bridge.harvest, hdr.bridge.to_worker) {
            (0, 1): parse_ethernet;
            default: accept;
        }
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.p4r);
        transition accept;              /* the extension is payload here */
    }
}

control P4ReduceEgressDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                               in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
                hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        pkt.emit(hdr.bridge);           /* valid only on the way to the harvest pass */
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.p4r);
    }
}
#endif
