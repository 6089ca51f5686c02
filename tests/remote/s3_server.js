// s3_server.js — an S3 server on 127.0.0.1 for the S3 tests
// (tests/remote/servers.sh start_s3): s3rver (npm, 3.7.x) behind a SigV4
// check of our own.
//
//   node s3_server.js MODULES DATA_DIR BUCKET KEY_ID SECRET TOKEN PORT_FILE LOG
//
// Why a check of our own: s3rver 3.7.1 parses a SigV4 Authorization header
// but does not verify it ("Signature version 4 calculation is
// unimplemented", lib/middleware/authentication.js) -- it would accept any
// secret.  So every request is verified here against the AWS SigV4
// specification (an implementation apart from libcurl's, which signs
// stoke's requests) before s3rver serves it:
//   - no Authorization header: 403 AccessDenied (the bucket is private);
//   - a key id other than KEY_ID: 403 InvalidAccessKeyId;
//   - SignedHeaders without host, x-amz-date and x-amz-content-sha256, or
//     a signature that does not match: 403 SignatureDoesNotMatch;
//   - TOKEN other than "-": the request must carry x-amz-security-token
//     TOKEN, signed (else 403 InvalidToken).
// Three more buckets live in other regions (FAR below), each answering a
// request signed for another region as S3 does, one way each (the first
// bucket takes any region):
//   BUCKET-far        400 AuthorizationHeaderMalformed with the header
//                     x-amz-bucket-region: eu-west-3;
//   BUCKET-far-body   400 AuthorizationHeaderMalformed, no header: the
//                     region only in the XML body, <Region>ap-south-1</Region>
//                     (what S3 sends when it omits the header);
//   BUCKET-far-moved  301 PermanentRedirect, no header: the region only in
//                     the body, <Region>sa-east-1</Region>.
// Port 0: the kernel picks; the port is written to PORT_FILE once it
// listens.  Each request is logged to LOG as "METHOD URL STATUS".  The
// caller runs this under `timeout`, so it stops by itself.
'use strict';
const [modules, dir, bucket, keyId, secret, token, portFile, logFile] =
  process.argv.slice(2);
const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const path = require('path');
// RFC 3986 unreserved characters stay, everything else is %XX (upper case).
function enc(s, keepSlash) {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b);
    if (/[A-Za-z0-9\-_.~]/.test(c) || (keepSlash && c === '/')) out += c;
    else out += '%' + b.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}
const dec = s => decodeURIComponent(s.replace(/\+/g, '%20'));
const sha256 = s => crypto.createHash('sha256').update(s).digest('hex');
const hmac = (k, s) => crypto.createHmac('sha256', k).update(s).digest();
// bucket suffix -> [region, how a wrong region is answered]
const FAR = {
  '-far': ['eu-west-3', 'header'],
  '-far-body': ['ap-south-1', 'body'],
  '-far-moved': ['sa-east-1', 'moved'],
};

// The SigV4 signature of a request (AWS's "Signature Calculations for the
// Authorization Header"): the canonical request from the raw URL (path
// segments and query pairs decoded, then encoded strictly; pairs sorted),
// the signed headers, the payload hash the client declared.
function sign(method, url, hdrs, signed, secret, day, region) {
  const q = url.indexOf('?');
  const rawPath = q < 0 ? url : url.slice(0, q);
  const rawQuery = q < 0 ? '' : url.slice(q + 1);
  const uri = rawPath.split('/').map(p => enc(dec(p), false)).join('/');
  const query = rawQuery === '' ? '' : rawQuery.split('&').map(kv => {
    const e = kv.indexOf('=');
    const k = e < 0 ? kv : kv.slice(0, e), v = e < 0 ? '' : kv.slice(e + 1);
    return [enc(dec(k), false), enc(dec(v), false)];
  }).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1))
    .map(([k, v]) => k + '=' + v).join('&');
  const names = signed.split(';');
  const headers = names.map(n =>
    n + ':' + String(hdrs[n] || '').trim().replace(/\s+/g, ' ') + '\n').join('');
  const canonical = [method, uri, query, headers, signed,
                     hdrs['x-amz-content-sha256']].join('\n');
  const scope = day + '/' + region + '/s3/aws4_request';
  const toSign = ['AWS4-HMAC-SHA256', hdrs['x-amz-date'] || '', scope,
                  sha256(canonical)].join('\n');
  let k = hmac('AWS4' + secret, day);
  k = hmac(hmac(hmac(k, region), 's3'), 'aws4_request');
  return hmac(k, toSign).toString('hex');
}

// The verifier against AWS's published examples (the S3 API reference,
// "Examples: Signature Calculations in AWS SigV4", GET Object with a Range
// and GET Bucket with a query): `node s3_server.js --self-test`.
function selfTest() {
  const secret = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
  const base = {
    host: 'examplebucket.s3.amazonaws.com', 'x-amz-date': '20130524T000000Z',
    'x-amz-content-sha256':
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  };
  const cases = [
    ['/test.txt', Object.assign({ range: 'bytes=0-9' }, base),
     'host;range;x-amz-content-sha256;x-amz-date',
     'f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41'],
    ['/?max-keys=2&prefix=J', base, 'host;x-amz-content-sha256;x-amz-date',
     '34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7'],
  ];
  let bad = 0;
  for (const [url, hdrs, signed, want] of cases) {
    const got = sign('GET', url, hdrs, signed, secret, '20130524', 'us-east-1');
    if (got !== want) {
      console.error('s3_server self-test: ' + url + ': ' + got + ' != ' + want);
      bad++;
    }
  }
  process.exit(bad ? 1 : 0);
}

function refuse(res, status, code, message, more) {
  res.writeHead(status, { 'Content-Type': 'application/xml' });
  res.end('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>' + code +
          '</Code><Message>' + message + '</Message>' + (more || '') +
          '</Error>');
  return false;
}

// A request for a bucket of FAR signed for another region: S3's answer,
// the way that bucket answers; undefined when the region is right.
function wrongRegion(res, reqBucket, region) {
  const far = Object.keys(FAR).find(s => reqBucket === bucket + s);
  if (!far) return undefined;
  const [where, how] = FAR[far];
  if (region === where) return undefined;
  // As S3 writes them: RequestId and HostId after the region, so that the
  // client reads a body of realistic length.
  const ids = '<RequestId>4442587FB7D0A2F9</RequestId><HostId>' +
    'Uuag1LuByRx9e6j5Onimru9pO4ZVKnJ2Qz7/C1NPcfTWAtRPfTaOFg==</HostId>';
  if (how === 'header') res.setHeader('x-amz-bucket-region', where);
  if (how === 'moved')
    return refuse(res, 301, 'PermanentRedirect',
                  'The bucket you are attempting to access must be addressed ' +
                  'using the specified endpoint.',
                  '<Bucket>' + reqBucket + '</Bucket><Region>' + where +
                  '</Region>' + ids);
  return refuse(res, 400, 'AuthorizationHeaderMalformed',
                "The authorization header is malformed; the region '" +
                region + "' is wrong; expecting '" + where + "'",
                how === 'body' ? '<Region>' + where + '</Region>' + ids : ids);
}

function verify(req, res) {
  const auth = req.headers['authorization'];
  if (!auth) return refuse(res, 403, 'AccessDenied', 'Access Denied');
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return refuse(res, 400, 'AuthorizationHeaderMalformed', 'bad header');
  const [, id, day, region, signed, sig] = m;
  if (id !== keyId)
    return refuse(res, 403, 'InvalidAccessKeyId', 'no such key id');
  const reqBucket = req.url.split('?')[0].split('/')[1];
  const moved = wrongRegion(res, reqBucket, region);
  if (moved !== undefined) return moved;
  const names = signed.split(';');
  for (const need of ['host', 'x-amz-date', 'x-amz-content-sha256'])
    if (!names.includes(need))
      return refuse(res, 403, 'SignatureDoesNotMatch', need + ' not signed');
  if (token !== '-' && (req.headers['x-amz-security-token'] !== token ||
                        !names.includes('x-amz-security-token')))
    return refuse(res, 403, 'InvalidToken', 'bad or unsigned token');
  const date = req.headers['x-amz-date'] || '';
  const want = sign(req.method, req.url, req.headers, signed, secret, day, region);
  if (want !== sig || !date.startsWith(day))
    return refuse(res, 403, 'SignatureDoesNotMatch',
                  'The request signature we calculated does not match the signature you provided.');
  return true;
}

function main() {
  const S3rver = require(path.join(modules, 's3rver'));
  const account = require(path.join(modules, 's3rver/lib/models/account'));
  // s3rver looks the key id up in its own registry: ours only (its built-in
  // S3RVER/S3RVER pair would accept a test that signs with it by mistake).
  account.DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
  account.DUMMY_ACCOUNT.createKeyPair(keyId, secret);
  const s3 = new S3rver({
    silent: true,
    directory: dir,
    vhostBuckets: false, // path-style only: the tests set AWS_ENDPOINT_URL
    // The signature was checked above; s3rver's own check is SigV2-only.
    allowMismatchedSignatures: true,
    configureBuckets: [{ name: bucket }].concat(
      Object.keys(FAR).map(s => ({ name: bucket + s }))),
  });
  const serve = s3.callback();
  const log = fs.openSync(logFile, 'a');
  s3.configureBuckets().then(() => {
    const server = http.createServer((req, res) => {
      res.on('finish', () =>
        fs.writeSync(log, req.method + ' ' + req.url + ' ' + res.statusCode + '\n'));
      if (verify(req, res)) serve(req, res);
    });
    server.keepAliveTimeout = 60000;
    server.listen(0, '127.0.0.1', () => {
      fs.writeFileSync(portFile + '.tmp', String(server.address().port));
      fs.renameSync(portFile + '.tmp', portFile);
    });
  }, err => {
    console.error('s3_server: ' + err);
    process.exit(1);
  });
}

if (process.argv[2] === '--self-test') selfTest();
else main();
