// The platform's ceiling for bench/serve.bench.ts: a bare node:http server answering Range requests
// of one file from memory (no framework, no auth, no logs). Usage: tsx bare-range-server.ts FILE PORT
import { readFileSync } from 'node:fs';
import http from 'node:http';
import parseRange from 'range-parser';

const [file = '', port = '0'] = process.argv.slice(2);
const bytes = readFileSync(file);
http
  .createServer((req, res) => {
    const ranges = parseRange(bytes.length, req.headers.range ?? '');
    if (!Array.isArray(ranges) || ranges.length !== 1) {
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': bytes.length });
      res.end(bytes);
      return;
    }
    const { start, end } = ranges[0]!;
    res.writeHead(206, {
      'content-type': 'audio/mpeg',
      'content-length': end - start + 1,
      'content-range': `bytes ${start}-${end}/${bytes.length}`,
      'accept-ranges': 'bytes',
    });
    res.end(bytes.subarray(start, end + 1));
  })
  .listen(Number(port), '127.0.0.1', () => process.send?.('listening'));
