/** No valid credentials: the caller should sign in (401). */
export class Unauthenticated extends Error {
  override name = "Unauthenticated";
  constructor(message = "Sign in, or send an API token as `Authorization: Bearer <token>`.") {
    super(message);
  }
}

/** Valid credentials without the needed role (403). */
export class Forbidden extends Error {
  override name = "Forbidden";
}

/** A session-cookie request that came from another site's page (403): the cookie does not count. */
export class CrossOriginRefused extends Forbidden {
  override name = "CrossOriginRefused";
}
