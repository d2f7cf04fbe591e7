// The reference side of gpt2_agree.sh: the npm package gpt-3-encoder on one
// corpus file, read as node reads text (invalid UTF-8 becomes U+FFFD).
//   node gpt2_reference.js PACKAGE_DIR FILE OUT_PREFIX
// writes OUT_PREFIX.text (the text the package saw, as UTF-8), .ids (its
// encode(), one line of ids separated by spaces) and .decoded (its decode()
// of those ids, as UTF-8).
'use strict';
const fs = require('fs');
const [pkg, file, out] = process.argv.slice(2);
const enc = require(pkg);
const text = fs.readFileSync(file).toString('utf8');
const ids = enc.encode(text);
if (ids.some(id => typeof id !== 'number')) {
  console.error(`${file}: gpt-3-encoder gave an undefined id (a piece missing from its vocabulary)`);
  process.exit(1);
}
fs.writeFileSync(out + '.text', Buffer.from(text, 'utf8'));
fs.writeFileSync(out + '.ids', ids.join(' ') + '\n');
fs.writeFileSync(out + '.decoded', Buffer.from(enc.decode(ids), 'utf8'));
