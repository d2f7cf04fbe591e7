// Seeded texts for gpt2_agree.sh beside the committed corpus: 3,000 pieces
// drawn from the corpus's hard cases (contractions of both cases, scripts,
// emoji sequences, Unicode spaces, combining marks, <|endoftext|>) in
// combinations nobody wrote by hand. The same seed gives the same text.
//   node gpt2_random.js SEED OUT_FILE
'use strict';
const fs = require('fs');
const pool = ['a', 'b', 'Z', 'é', 'ß', 'я', '中', 'ع', ' ', '  ', '\t', '\n', '\r\n', "'s", "'S", "'t", "'re", "'ll",
  "'", '1', '23', '٣', '😀', '👨‍👩‍👧', '🇫🇷', '\u00a0', '\u3000', '\u0085', '\ufeff', '\u2028', ',', '.', '!',
  '<|endoftext|>', '\u0301', 'ﬁ', 'Ⅻ', '²', '_', '-', '$', '\u200d', '\ufe0f', '\u000b', '\u001c'];
let state = Number(process.argv[2]);
const next = () => (state = (state * 1103515245 + 12345) % 2147483648);
let text = '';
for (let i = 0; i < 3000; i++) text += pool[next() % pool.length];
fs.writeFileSync(process.argv[3], Buffer.from(text, 'utf8'));
