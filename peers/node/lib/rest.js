'use strict';
// The REST study's service on Express: bcrypt password set/verify, a JSON
// user store, and a long poll. Stores come from ./shared (local, or sharded
// across cluster workers).

const crypto = require('node:crypto');
const express = require('express');
const bcrypt = require('bcryptjs');

function text(res, code, body) {
  res.status(code).type('text/plain').send(body);
}

function methodNotAllowed(allow) {
  return (req, res) => {
    res.set('Allow', allow);
    text(res, 405, 'Method not allowed.');
  };
}

// Bodies are JSON whatever their Content-Type says: load generators often
// send none. An empty body is not JSON.
const jsonBody = express.json({
  type: () => true,
  strict: false,
  limit: '1mb',
  verify: (req, res, buf) => {
    req.bodyBytes = buf.length;
  },
});

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// password extracts {"password": "..."}; it answers 400 and returns null otherwise.
function password(req, res) {
  if (!req.bodyBytes || !isObject(req.body)) {
    text(res, 400, 'Bad JSON.');
    return null;
  }
  if (typeof req.body.password !== 'string') {
    text(res, 400, 'Missing password.');
    return null;
  }
  return req.body.password;
}

function createApp(opts, stores) {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('case sensitive routing', true);

  // Verifying an unknown user hashes against this, so that it costs as much
  // as verifying a known one and timing does not reveal which users exist.
  const dummyHash = bcrypt.hashSync(crypto.randomBytes(16).toString('hex'), opts.bcryptCost);

  app.route('/')
    .get((req, res) => text(res, 200, 'OK'))
    .all(methodNotAllowed('GET'));

  app.route('/longPoll')
    .get((req, res) => {
      const t = setTimeout(() => text(res, 200, 'OK'), opts.longPollMs);
      res.on('close', () => clearTimeout(t));
    })
    .all(methodNotAllowed('GET'));

  app.route('/password/set/:user')
    .post(jsonBody, async (req, res) => {
      const pw = password(req, res);
      if (pw === null) return;
      const hash = await bcrypt.hash(pw, opts.bcryptCost);
      await stores.setPassword(req.params.user, hash);
      text(res, 200, 'OK');
    })
    .all(methodNotAllowed('POST'));

  app.route('/password/verify/:user')
    .post(jsonBody, async (req, res) => {
      const pw = password(req, res);
      if (pw === null) return;
      const hash = await stores.getPassword(req.params.user);
      const ok = await bcrypt.compare(pw, hash === null ? dummyHash : hash);
      if (hash === null) text(res, 400, 'Password not found');
      else if (ok) text(res, 200, 'OK');
      else text(res, 403, 'Forbidden');
    })
    .all(methodNotAllowed('POST'));

  app.route('/user/set/:user')
    .post(jsonBody, async (req, res) => {
      if (!req.bodyBytes || !isObject(req.body)) {
        text(res, 400, 'Bad JSON: expected an object.');
        return;
      }
      await stores.setUser(req.params.user, JSON.stringify(req.body));
      text(res, 200, 'OK');
    })
    .all(methodNotAllowed('POST'));

  app.route('/user/get/:user')
    .get(async (req, res) => {
      const json = await stores.getUser(req.params.user);
      if (json === null) text(res, 400, 'User not found.');
      else res.status(200).type('application/json').send(json);
    })
    .all(methodNotAllowed('GET'));

  app.use((req, res) => text(res, 404, 'Not found.'));

  // body-parser's errors: malformed JSON, oversized bodies.
  app.use((err, req, res, next) => { // eslint-disable-line no-unused-vars
    if (err.type === 'entity.parse.failed') text(res, 400, 'Bad JSON.');
    else if (err.type === 'entity.too.large') text(res, 413, 'Body too large.');
    else text(res, err.status || 500, err.message);
  });
  return app;
}

module.exports = { createApp };
