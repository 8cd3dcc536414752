"""The web console (``kafkacore console``): a small HTTP server on asyncio that serves a
single-page application (static/) and the JSON API it is built on (/api/...).

Modules, from the wire up:
  http.py       HTTP/1.1 on asyncio streams: requests, responses, routing by path pattern
  admin_pool.py AdminClients lent to worker threads, one per thread at a time
  sampler.py    end offsets and group lag sampled every few seconds, kept in small rings
  records.py    the message browser: Fetch, decode, and show keys/values/headers safely
  record_filter.py  the browser's search: substrings and JSON path tests
  schemas.py    Confluent-framed keys/values: schema ids, the registry, Avro (fastavro)
  api.py        the JSON API: one function per endpoint, over the AdminClient and the sampler
  brokers.py    the Brokers pages' answers: replicas, leaders, log dirs, a broker's configs
  produce.py    the produce form's writes, through one Producer made on first use
  auth.py       the console's own login (--users): password hashes, the users file, sessions
  app.py        the console itself: pages, static files, the API, the write token, the
                login and the read-only mode

Everything the browser loads ships in static/: no CDN, no external font, so the console works
offline. It talks to the cluster through the Kafka protocol only, like every operator tool.
"""
