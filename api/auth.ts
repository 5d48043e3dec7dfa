// Authentication (Authorization: Bearer <token>, tokens stored hashed) and role checks on every
// request: developer < devops < admin.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Db } from '../shared/db';
import { findUserByToken, roleAtLeast, type Role, type User } from '../shared/db/users';
import { HttpError } from './errors';

declare module 'express-serve-static-core' {
  interface Request {
    user?: User;
  }
}

export function authenticate(db: Db): RequestHandler {
  return (req: Request, _res: Response, next: NextFunction) => {
    const header = req.get('authorization') ?? '';
    const m = /^Bearer\s+(\S+)$/i.exec(header);
    if (!m?.[1]) {
      next(new HttpError(401, 'unauthorized', 'Send a valid token as "Authorization: Bearer <token>".'));
      return;
    }
    findUserByToken(db, m[1])
      .then((user) => {
        if (!user) throw new HttpError(401, 'unauthorized', 'The token is not valid.');
        req.user = user;
        next();
      })
      .catch(next);
  };
}

const ROLE_MESSAGES: Record<Role, string> = {
  developer: 'Requires the developer operation role.',
  devops: 'Requires the devops operation role.',
  admin: 'Requires the admin operation role.',
};

/** Throws the 403 of a caller below `role` (for checks that depend on the request body). */
export function assertRole(user: User, role: Role): void {
  if (!roleAtLeast(user.role, role)) throw new HttpError(403, 'forbidden', ROLE_MESSAGES[role]);
}

export function requireRole(role: Role): RequestHandler {
  return (req, _res, next) => {
    if (!req.user) return next(new HttpError(401, 'unauthorized', 'Not authenticated.'));
    try {
      assertRole(req.user, role);
    } catch (err) {
      return next(err);
    }
    next();
  };
}

export function currentUser(req: Request): User {
  if (!req.user) throw new HttpError(401, 'unauthorized', 'Not authenticated.');
  return req.user;
}
