/* Candidate "chunks": the block is CHUNKS separate bit<2048> headers (64 values each, the
 * widest type p4c-bm2-ss accepts) and each chunk has its own register array: CHUNKS
 * read-add-writes per packet, each as wide as the packed encoding's one today. */
#include "headers.p4"
#include "chunk_list.p4"

header chunk_t { bit<2048> word; }

#define CHUNK_HEADER(i) chunk_t c##i;
struct headers_t {
    ethernet_t eth;
    block_t    block;
    FOR_EACH_CHUNK(CHUNK_HEADER)
}

#include "controls.p4"

parser WideParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            ETHERTYPE_BLOCK: block;
            default: accept;
        }
    }
    state block {
        pkt.extract(hdr.block);
#define CHUNK_EXTRACT(i) pkt.extract(hdr.c##i);
        FOR_EACH_CHUNK(CHUNK_EXTRACT)
        transition accept;
    }
}

control WideIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
#define CHUNK_REGISTER(i) register<bit<2048>>(SLOTS) sums_##i;
    FOR_EACH_CHUNK(CHUNK_REGISTER)

    /* per chunk: read, add into the header (the sum goes out in it), write it back */
    action add() {
        bit<2048> stored;
#define CHUNK_ADD(i)                                                           \
        sums_##i.read(stored, meta.slot_index);                                \
        hdr.c##i.word = (hdr.block.first == 1) ? hdr.c##i.word                 \
                                               : stored + hdr.c##i.word;       \
        sums_##i.write(meta.slot_index, hdr.c##i.word);
        FOR_EACH_CHUNK(CHUNK_ADD)
    }

    apply {
        if (hdr.block.isValid()) {
            meta.slot_index = (bit<32>)hdr.block.slot;
            add();
        }
        WIDE_FORWARD(standard_metadata)
    }
}

WIDE_MAIN(WideParser, WideIngress)
