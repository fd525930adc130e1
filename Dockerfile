# syntax=docker/dockerfile:1
# Bounded: one image for the web, the workers, the migration step and the simulators (compose.yaml).
# deps → build → runtime. The runtime stage has the production dependencies, the built web app and
# the sources the workers run with tsx; no compiler, no test tools, no browser.

ARG NODE_IMAGE=node:20.19-bookworm-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
ENV NEXT_TELEMETRY_DISABLED=1 \
    # Prisma's native schema engine is never needed: migrations run through scripts/db/migrate.ts,
    # and `prisma generate` works without it (see the README).
    PRISMA_SCHEMA_ENGINE_BINARY=/bin/false
# The postinstall script generates the Prisma client from the schema: it comes first.
COPY package.json package-lock.json prisma.config.ts ./
COPY prisma ./prisma
COPY ops/npm ./ops/npm
RUN npm ci --no-audit --no-fund

FROM deps AS build
COPY . .
ENV NODE_ENV=production
RUN node node_modules/next/dist/bin/next build \
 && rm -rf .next/cache \
 && npm prune --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE} AS runtime
WORKDIR /app
ENV NODE_ENV=production \
    NEXT_TELEMETRY_DISABLED=1 \
    PRISMA_SCHEMA_ENGINE_BINARY=/bin/false \
    PORT=3000
COPY --from=build --chown=node:node /app/package.json /app/package-lock.json /app/tsconfig.json /app/next.config.js /app/prisma.config.ts ./
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/.next ./.next
COPY --from=build --chown=node:node /app/generated ./generated
COPY --from=build --chown=node:node /app/prisma ./prisma
COPY --from=build --chown=node:node /app/lib ./lib
COPY --from=build --chown=node:node /app/workers ./workers
COPY --from=build --chown=node:node /app/scripts ./scripts
USER node
EXPOSE 3000 4010
# compose.yaml chooses the part: start:web, start:workers, start:sim or db:migrate.
CMD ["npm", "run", "start:web", "--", "--no-build"]
